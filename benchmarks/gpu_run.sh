#!/usr/bin/env bash
# The GPU measurements of benchmarks/README.md, reproducible on a bare CUDA machine with no package registry.
#
#   PYTHON=.venv/bin/python bash benchmarks/gpu_run.sh prepare
#       here, with a registry: the pinned GGML sdist, and wheels for Python 3.12 of the cffi that built
#       ggrad's binding (PYTHON's), into .gpu/ (ignored by git)
#   bash benchmarks/gpu_run.sh VERB [VERB ...]    # there, with .gpu/ and ggrad/ggml/_ffi.abi3.so carried
#
# On the GPU machine it builds GGML's CUDA backend from the sdist in /tmp (sm_90, CUDA graphs on, no
# flash-attention kernels, which ggrad does not use: about 2-4 minutes at -j16), points ggrad at it
# (GGRAD_GGML_LIB_DIR) and runs the verbs in order:
#   tests     tests/gpu                      amp200   tests/gpu's autocast GPT at 200 steps
#   gpu       W2 and big f32 against PyTorch, TF32 off and on
#   nographs  the same, ggrad only, GGML_CUDA_DISABLE_GRAPHS=1
#   f16 bf16  the big GPT under autocast against PyTorch's
#   profile profile16   the big step's per-op GPU time by shape (f32, autocast f16)
#   ab        ab_step.py over the source trees in .gpu/trees/* and this one (big, f32 and autocast f16)
set -uo pipefail
cd "$(dirname "$0")/.."
SDIST=libggml_python-0.20.2.post1

if [ "${1:-}" = prepare ]; then
    PYTHON=${PYTHON:-python}
    mkdir -p .gpu
    "$PYTHON" -m pip download -q --no-deps --no-binary :all: -d .gpu "libggml-python==0.20.2.post1"
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .gpu \
        "cffi==$("$PYTHON" -c 'import cffi; print(cffi.__version__)')" pycparser
    exit
fi

python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
tar xzf .gpu/$SDIST.tar.gz -C /tmp
start=$(date +%s)
cmake -S /tmp/$SDIST/ggml -B /tmp/ggml-cuda -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_RPC=ON \
    -DGGML_NATIVE=OFF -DGGML_CUDA_GRAPHS=ON -DGGML_CUDA_FA=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF \
    -DCMAKE_BUILD_TYPE=Release >/tmp/cmake.log 2>&1 && ninja -C /tmp/ggml-cuda -j16 >/tmp/ninja.log 2>&1 \
    || { tail -30 /tmp/cmake.log /tmp/ninja.log; exit 1; }
echo "GGML build: $(( $(date +%s) - start )) s; $(nvidia-smi --query-gpu=name --format=csv,noheader)"
export GGRAD_GGML_LIB_DIR=/tmp/ggml-cuda/src

bench="python3 benchmarks/bench_gpt_gpu.py --device cuda:0 --threads 16 --steps 15"
profile="python3 benchmarks/profile_step.py --device cuda:0 --config big --threads 16 --steps 3 --top 45 --by-shape"
ab="python3 benchmarks/ab_step.py .gpu/trees/* . --device cuda:0 --config big --threads 16 --rounds 3 --steps 10"
for verb in "$@"; do
    echo "=== $verb"
    case $verb in
        tests) python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tail -15 ;;
        amp200) GGRAD_AMP_STEPS=200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_amp_gpu.py -k tracks \
                    2>&1 | tail -5 ;;
        gpu) $bench --configs w2 big --tf32 ;;
        nographs) GGML_CUDA_DISABLE_GRAPHS=1 $bench --configs w2 big --no-torch ;;
        f16|bf16) $bench --configs big --autocast "$verb" ;;
        profile) $profile ;;
        profile16) $profile --autocast f16 ;;
        ab) for tree in .gpu/trees/*; do cp ggrad/ggml/_ffi.abi3.so "$tree/ggrad/ggml/"; done
            $ab && $ab --autocast f16 ;;
        *) echo "unknown verb: $verb"; exit 2 ;;
    esac
done
