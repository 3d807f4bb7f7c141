#!/usr/bin/env bash
# Install ggrad (editable, with the test extra) and a GGML built for this machine's CPU.
#
#   scripts/install.sh          # in an activated virtual environment; or PYTHON=/path/to/python scripts/install.sh
#
# 1. pip install -e ".[test]": ggrad, numpy, cffi, tqdm, pytest and the libggml-python wheel (generic x86-64).
# 2. libggml-python==0.20.2.post1 rebuilt from its sdist with the native instruction set, the llamafile
#    matmul kernels, OpenMP threads and RPC (the W2 step 1.2-1.8x faster than on the wheel; see
#    benchmarks/README.md), plus whatever CMAKE_ARGS adds (e.g. -DGGML_CUDA=ON, which brings
#    -DGGML_CUDA_GRAPHS=ON unless CMAKE_ARGS names it). Not GGML's BLAS backend: OpenBLAS threads spin
#    against GGML's (a 4-10x slowdown seen). With CUDA, the sdist (its hash checked) first gets ggrad's
#    hook in its CUDA backend (scripts/patch_ggml_cuda.py), and nvcc then builds ggrad's CUDA twins
#    (scripts/build_cuda_twins.sh; CUDA_ARCHS, default 90): GGML runs ggrad's kernels on the GPU. With
#    -DGGML_VULKAN=ON likewise its Vulkan backend (scripts/patch_ggml_vulkan.py), and glslc then compiles
#    ggrad's shaders (scripts/build_vulkan_shaders.sh).
# 3. scripts/check_ggml.py in fresh interpreters, PyTorch imported first and last where it is installed.
# 4. Where 2 or 3 fails (no CMake or compiler for the sdist, a build that crashes): the wheel, reinstalled.
#
# GGRAD_GGML=wheel skips the build. A GGML that already has llamafile, OpenMP and RPC is kept unless
# CMAKE_ARGS is set or GGRAD_GGML=rebuild.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
GGML_PIN="libggml-python==0.20.2.post1"
SDIST=libggml_python-0.20.2.post1
SDIST_SHA256=e47ff53506342959ffb3ce15380b82828fea10ec5f208f9ef6915895f1a7a176
CPU_FLAGS="-DGGML_NATIVE=ON -DGGML_LLAMAFILE=ON -DGGML_OPENMP=ON -DGGML_RPC=ON"
MODE=${GGRAD_GGML:-build}

pip() { "${PYTHON}" -m pip "$@"; }

check() {  # the installed GGML runs a training step beside PyTorch, whichever is imported first
    "${PYTHON}" scripts/check_ggml.py --torch-first && "${PYTHON}" scripts/check_ggml.py >/dev/null
}

has_fast_build() {
    "${PYTHON}" -c "import ggrad.ggml as g, sys; i = g.build_info()
sys.exit(0 if i['llamafile'] and i['openmp'] and 'RPC' in i['backends'] else 1)" 2>/dev/null
}

use_wheel() {
    echo "install.sh: $1; using the PyPI wheel of ${GGML_PIN} (generic x86-64, no llamafile, no OpenMP, no RPC)" >&2
    # --force-reinstall replaces a broken build; --no-deps leaves everything else as it is
    pip install --force-reinstall --no-deps --only-binary libggml-python "${GGML_PIN}"
    check
}

pip install -e ".[test]"

if [ "${MODE}" = "wheel" ]; then
    use_wheel "GGRAD_GGML=wheel"
    exit 0
fi
if [ "${MODE}" != "rebuild" ] && [ -z "${CMAKE_ARGS:-}" ] && has_fast_build && check; then
    echo "install.sh: the installed GGML already has llamafile, OpenMP and RPC; kept (GGRAD_GGML=rebuild rebuilds it)"
    exit 0
fi

if [[ " ${CMAKE_ARGS:-} " == *"-DGGML_CUDA=ON"* && " ${CMAKE_ARGS} " != *"GGML_CUDA_GRAPHS"* ]]; then
    # a training step replays its cached graph at the same addresses: CUDA graphs launch it as one
    CMAKE_ARGS="${CMAKE_ARGS} -DGGML_CUDA_GRAPHS=ON"
fi
source=(--no-binary libggml-python "${GGML_PIN}")
cuda=$([[ " ${CMAKE_ARGS:-} " == *"-DGGML_CUDA=ON"* ]] && echo 1 || true)
vulkan=$([[ " ${CMAKE_ARGS:-} " == *"-DGGML_VULKAN=ON"* ]] && echo 1 || true)
if [ -n "${cuda}${vulkan}" ]; then
    # the exact pinned sdist, with ggrad's hooks in its CUDA and Vulkan backends (GGML runs ggrad's kernels)
    sdist_dir=$(mktemp -d)
    pip download --no-deps --no-binary :all: -d "${sdist_dir}" "${GGML_PIN}"
    echo "${SDIST_SHA256}  ${sdist_dir}/${SDIST}.tar.gz" | sha256sum -c -
    tar xzf "${sdist_dir}/${SDIST}.tar.gz" -C "${sdist_dir}"
    [ -z "${cuda}" ] || "${PYTHON}" scripts/patch_ggml_cuda.py "${sdist_dir}/${SDIST}/ggml"
    [ -z "${vulkan}" ] || "${PYTHON}" scripts/patch_ggml_vulkan.py "${sdist_dir}/${SDIST}/ggml"
    source=("${sdist_dir}/${SDIST}")
fi
echo "install.sh: building ${GGML_PIN} from source with ${CPU_FLAGS} ${CMAKE_ARGS:-} (a minute or two)"
# --force-reinstall: the wheel is installed already; --no-cache-dir: never reuse a wheel pip cached from a
# build with other flags (or for another machine's CPU). ggrad itself needs no rebuild.
if ! CMAKE_ARGS="${CPU_FLAGS} ${CMAKE_ARGS:-}" pip install --force-reinstall --no-deps --no-cache-dir "${source[@]}"; then
    use_wheel "the source build of GGML failed (see pip's output above)"
    exit 0
fi
if ! check; then
    use_wheel "the GGML built here does not run (see above)"
    exit 0
fi
if [ -n "${cuda}" ] && ! PYTHON="${PYTHON}" scripts/build_cuda_twins.sh; then
    echo "install.sh: ggrad's CUDA twins did not build (see nvcc's output above); GGML's own ops serve" >&2
fi
if [ -n "${vulkan}" ] && ! scripts/build_vulkan_shaders.sh; then
    echo "install.sh: ggrad's Vulkan shaders did not build (see glslc's output above); GGML's own ops serve" >&2
fi
echo "install.sh: done"
