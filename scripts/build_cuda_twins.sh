#!/usr/bin/env bash
# Build ggrad's CUDA twins (ggrad/ggml/cuda/*.cu) with nvcc into a shared library that ggrad registers
# with GGML's CUDA backend (ggrad/ggml/gpu_twins.py); the backend must carry ggrad's hook
# (scripts/patch_ggml_cuda.py, which scripts/install.sh applies where it builds GGML with CUDA).
#
#   scripts/build_cuda_twins.sh [OUTPUT]     # default: ggrad/ggml/_cuda_twins.so
#
# GGML's headers: $GGML_INCLUDE, else the installed libggml's ($PYTHON finds it). Architectures: $CUDA_ARCHS
# (default "90": Hopper), machine code for each and PTX for the last, which newer GPUs compile at load.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
output=${1:-ggrad/ggml/_cuda_twins.so}
include=${GGML_INCLUDE:-$("${PYTHON}" -c 'import libggml, os; print(os.path.join(os.path.dirname(libggml.__file__), "include"))')}
gencode=()
last=
for arch in ${CUDA_ARCHS:-90}; do
    gencode+=(-gencode "arch=compute_${arch},code=sm_${arch}")
    last=${arch}
done
gencode+=(-gencode "arch=compute_${last},code=compute_${last}")
nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC "${gencode[@]}" -I "${include}" -o "${output}" ggrad/ggml/cuda/twins.cu ggrad/ggml/cuda/flash_attn.cu \
    ggrad/ggml/cuda/overrides.cu
echo "build_cuda_twins.sh: ${output}"
