#!/usr/bin/env bash
# The GPU measurements of benchmarks/README.md, reproducible on a bare CUDA machine with no package registry.
#
#   PYTHON=.venv/bin/python bash benchmarks/gpu_run.sh prepare
#       here, with a registry: the pinned GGML sdist, and wheels for Python 3.12 of the cffi that built
#       ggrad's binding (PYTHON's), into .gpu/ (ignored by git)
#       and, from this Debian machine's mirror, Debian 13's Vulkan headers, loader and glslc (Debian 12's are
#       too old for GGML's Vulkan backend) and the GL loader pieces NVIDIA's Vulkan driver needs
#   bash benchmarks/gpu_run.sh VERB [VERB ...]    # there, with .gpu/ and ggrad/ggml/_ffi.abi3.so carried
#   bash benchmarks/gpu_run.sh vulkan VERB [VERB ...] cuda VERB [VERB ...]
#
# On the GPU machine it builds GGML from the sdist in /tmp: its CUDA backend (sm_90, CUDA graphs on, no
# flash-attention kernels (GGML's; ggrad has its own twins): about 2-4 minutes at -j16) and, where the verb `vulkan` is
# named, its Vulkan backend (about 2.5 minutes), side by side; a later call on the same machine reuses them.
# It points ggrad at one (GGRAD_GGML_LIB_DIR; `cuda` and `vulkan` switch, CUDA first unless the list begins
# with `vulkan`) and runs the verbs in order on its first device (PyTorch, where a verb times it, on CUDA):
#   tests     tests/gpu (the whole log in $GPU_TESTS_LOG, default /tmp/gpu_tests.log)   amp200   tests/gpu's autocast GPT at 200 steps
#   gpu       W2 and big f32 against PyTorch, TF32 off and on
#   alone     the same, ggrad only          nographs  the same, GGML_CUDA_DISABLE_GRAPHS=1
#   f16 bf16  the big GPT under autocast against PyTorch's, eager and with $TORCH_VARIANTS (default sdpa;
#             "sdpa compile" adds torch.compile)
#   profile profile16   the big step's per-op GPU time by shape (f32, autocast f16), each node synchronised
#   kernels kernels16 kernelsbf16   the big step's GPU time by kernel, not synchronised (CUPTI's records:
#             benchmarks/kernel_trace.c, profile_kernels.py; f32, autocast f16, bf16)
#   vkperf vkperf16 vkperfbf16   the big step's GPU time by op on Vulkan, from GGML's own timestamps (f32,
#             autocast f16, bf16; profile_vulkan.py)
#   kernelsgen  the same for a decoded token of bench_generate.py's small and large char-GPT (batch 1)
#   ab        ab_step.py over the source trees in .gpu/trees/* and this one (big, f32 and autocast f16)
#   choices   ab_step.py over this tree with lowering choices set, autocast f16: on CUDA attention=kernel
#             against half_kernel; on Vulkan the flash shaders (attention=kernel) and reduce_leading=repeat_back
#             against the backend's own ($CHOICES names other variants)
#   flash     flash attention's CUDA twins against the CPU kernels on hand-made nodes, and their times
#             (benchmarks/flash_attn_cuda.cu; needs no GGML build)
#   twins-off twins-on   the verbs after it run without / with ggrad's CUDA twins (built with the CUDA backend,
#             which carries ggrad's hook: scripts/patch_ggml_cuda.py, scripts/build_cuda_twins.sh)
#   overrides-off overrides-on   the verbs after it leave GGML's copies, conversions and embedding gradients
#             to GGML / to ggrad's kernels where they apply (cuda/overrides.cu)
#   alone16 alonebf16   the big GPT under autocast, ggrad only
#   track     the big GPT 1,000 steps in f32, autocast f16 and bf16 (compile_step): does autocast track f32's loss
#             (track_autocast.py; $TRACK_STEPS steps)
#   replay16  the big GPT f32, autocast f16 and bf16 eager and through ggrad.compile_step (recorded once, replayed)
#             beside PyTorch eager and $TORCH_VARIANTS (as f16), and tests/gpu/test_compiled_step_gpu.py
#   qlora     a QLoRA step of the 112M Llama (q4_0 GGUF base, r=16, seq 256, autocast bf16) against PyTorch +
#             peft on the same model in bf16: tokens/s and peak memory (bench_qlora.py; $QLORA_ARGS adds
#             options, e.g. "--checkpointing" or "--batch 8")
#   dp        data parallel with the all-reduce on the devices: tests/gpu/test_dp_peer_gpu.py and
#             bench_dp_gpu.py (big GPT; PyTorch DDP beside it) on every GPU, or on one GPU shown as two
#             (GGML_CUDA_DEVICES=2) where the machine has one
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
    mkdir -p .gpu/deb13 .gpu/gl /tmp/trixie-lists/partial
    mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" >/tmp/trixie.list
    trixie="-o Dir::Etc::SourceList=/tmp/trixie.list -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists=/tmp/trixie-lists"
    apt-get -q $trixie update >/dev/null
    (cd .gpu/deb13 && apt-get -q $trixie download libvulkan-dev libvulkan1 spirv-headers glslc libshaderc1)
    (cd .gpu/gl && apt-get -q download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
    exit
fi

python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
tar xzf .gpu/$SDIST.tar.gz -C /tmp
python3 scripts/patch_ggml_cuda.py /tmp/$SDIST/ggml || exit 1   # ggrad's hooks: its CUDA twins run in GGML,
python3 scripts/patch_ggml_vulkan.py /tmp/$SDIST/ggml || exit 1 # and its Vulkan shaders
common="-DGGML_RPC=ON -DGGML_NATIVE=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=Release"
vulkan_env() {
    export LD_LIBRARY_PATH=/opt/vk13/usr/lib/x86_64-linux-gnu
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
}
build() {   # build BACKEND into /tmp/ggml-BACKEND, unless an earlier call on this machine did
    [ -f /tmp/ggml-$1/src/libggml.so ] && return
    local flags start=$(date +%s)
    if [ $1 = vulkan ]; then
        mkdir -p /opt/vk13 && for deb in .gpu/deb13/*.deb; do dpkg -x "$deb" /opt/vk13; done
        for deb in .gpu/gl/*.deb; do dpkg -x "$deb" /; done; ldconfig; vulkan_env
        flags="-DGGML_VULKAN=ON -DCMAKE_PREFIX_PATH=/opt/vk13/usr -DVulkan_INCLUDE_DIR=/opt/vk13/usr/include
               -DVulkan_LIBRARY=/opt/vk13/usr/lib/x86_64-linux-gnu/libvulkan.so.1
               -DVulkan_GLSLC_EXECUTABLE=/opt/vk13/usr/bin/glslc"
    else
        flags="-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_GRAPHS=ON -DGGML_CUDA_FA=OFF"
    fi
    cmake -S /tmp/$SDIST/ggml -B /tmp/ggml-$1 -G Ninja $common $flags >/tmp/cmake-$1.log 2>&1 \
        && ninja -C /tmp/ggml-$1 -j16 >/tmp/ninja-$1.log 2>&1 \
        || { tail -30 /tmp/cmake-$1.log /tmp/ninja-$1.log; rm -rf /tmp/ggml-$1; return 1; }
    [ $1 = cuda ] && { GGML_INCLUDE=/tmp/$SDIST/ggml/include PYTHON=python3 scripts/build_cuda_twins.sh || return 1; }
    [ $1 = vulkan ] && { GLSLC=/opt/vk13/usr/bin/glslc bash scripts/build_vulkan_shaders.sh || return 1; }
    echo "GGML build ($1): $(( $(date +%s) - start )) s"
}
use() {   # run the verbs that follow on BACKEND's first device
    wait || exit 1
    build $1 || exit 1
    [ $1 = vulkan ] && vulkan_env
    export GGRAD_GGML_LIB_DIR=/tmp/ggml-$1/src
    device=$([ $1 = vulkan ] && echo vulkan:0 || echo cuda:0)
    echo "=== on $device ($(nvidia-smi --query-gpu=name --format=csv,noheader))"
}
# the backends named build side by side (16 cores), the first one named (or CUDA) is used first
device=
case "${1:-}" in cuda|vulkan) first= ;; *) first=cuda ;; esac
for backend in $(printf '%s\n' $first "$@" | grep -xE 'cuda|vulkan' | sort -u); do build $backend & done
[ -n "$first" ] && use cuda

for verb in "$@"; do
    bench="python3 benchmarks/bench_gpt_gpu.py --device $device --threads 16 --steps 15"
    profile="python3 benchmarks/profile_step.py --device $device --config big --threads 16 --steps 3 --top 45 --by-shape"
    ab="python3 benchmarks/ab_step.py .gpu/trees/* . --device $device --config big --threads 16 --rounds ${AB_ROUNDS:-3} --steps 10"
    echo "=== $verb"
    case $verb in
        cuda|vulkan) use $verb ;;
        twins-off) export GGRAD_CUDA_TWINS=/nonexistent ;;   # the verbs after it run GGML's own ops
        twins-on) unset GGRAD_CUDA_TWINS ;;
        overrides-off) export GGRAD_CUDA_OVERRIDES=0 ;;
        overrides-on) unset GGRAD_CUDA_OVERRIDES ;;
        alone16|alonebf16) $bench --configs big --autocast $( [ $verb = alone16 ] && echo f16 || echo bf16) --no-torch ;;
        tests) python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tee ${GPU_TESTS_LOG:-/tmp/gpu_tests.log} | tail -15 ;;
        amp200) GGRAD_AMP_STEPS=200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_amp_gpu.py -k tracks \
                    2>&1 | tail -5 ;;
        gpu) $bench --configs w2 big --tf32 ;;
        vkperf|vkperf16|vkperfbf16) python3 benchmarks/profile_vulkan.py --device $device --config big --top 45 \
                $( [ $verb = vkperf16 ] && echo --autocast f16; [ $verb = vkperfbf16 ] && echo --autocast bf16 ) ;;
        track) python3 benchmarks/track_autocast.py --device $device --steps ${TRACK_STEPS:-1000} ;;
        replay16) python3 -m pytest -q -p no:cacheprovider tests/gpu/test_compiled_step_gpu.py 2>&1 | tail -4
            $bench --configs big --autocast f16 --replay --torch-variants ${TORCH_VARIANTS-sdpa}
            $bench --configs big --autocast bf16 --replay --torch-variants ${TORCH_VARIANTS-sdpa}
            $bench --configs w2 big --replay --tf32 ;;
        alone) $bench --configs w2 big --no-torch ;;
        nographs) GGML_CUDA_DISABLE_GRAPHS=1 $bench --configs w2 big --no-torch ;;
        f16|bf16) $bench --configs big --autocast "$verb" --torch-variants ${TORCH_VARIANTS-sdpa} ;;
        kernels|kernels16|kernelsbf16|kernelsgen) cuda=${CUDA_HOME:-/usr/local/cuda}
            [ -f /tmp/kernel_trace.so ] || gcc -O2 -shared -fPIC -I $cuda/include -I $cuda/extras/CUPTI/include \
                -o /tmp/kernel_trace.so benchmarks/kernel_trace.c -L $cuda/lib64 -L $cuda/extras/CUPTI/lib64 \
                -Wl,-rpath,$cuda/lib64:$cuda/extras/CUPTI/lib64 -lcupti
            precision=${verb#kernels}; precision=${precision:+--autocast $( [ $precision = 16 ] && echo f16 || echo bf16)}
            runs=("--config big --steps 5 $precision")
            [ $verb = kernelsgen ] && runs=("--generate small --steps 3 --top 25" "--generate large --steps 3 --top 25")
            for run in "${runs[@]}"; do
                python3 benchmarks/profile_kernels.py --trace /tmp/kernel_trace.so --device $device --threads 16 \
                    $run | (c++filt 2>/dev/null || cat)
            done ;;
        profile) $profile ;;
        profile16) $profile --autocast f16 ;;
        flash) inc=/tmp/$SDIST/ggml/include
            gcc -O3 -fno-math-errno -c -I $inc -o /tmp/fa_cpu.o ggrad/ggml/csrc/flash_attn.c \
                && gcc -O3 -c -I $inc -o /tmp/fa_isa.o ggrad/ggml/csrc/isa.c \
                && nvcc -O3 -std=c++17 -arch=sm_90 -I $inc -o /tmp/flash_attn_cuda benchmarks/flash_attn_cuda.cu \
                       ggrad/ggml/cuda/flash_attn.cu /tmp/fa_cpu.o /tmp/fa_isa.o \
                && /tmp/flash_attn_cuda timing ;;
        qlora) python3 benchmarks/bench_qlora.py --device $device --threads 16 --steps ${QLORA_STEPS:-10} ${QLORA_ARGS:-} ;;
        dp) gpus=$(nvidia-smi -L | wc -l)
            dp_env=$([ "$gpus" -lt 2 ] && echo GGML_CUDA_DEVICES=2)
            python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_dp_peer_gpu.py 2>&1 | tail -4
            env $dp_env python3 benchmarks/bench_dp_gpu.py --config big --threads 16 --steps ${DP_STEPS:-10} ;;
        ab) for tree in .gpu/trees/*; do cp ggrad/ggml/_ffi.abi3.so "$tree/ggrad/ggml/"; done
            $ab && $ab --autocast f16 ;;
        choices) variants=${CHOICES:-$([ "$device" = vulkan:0 ] && echo ".:attention=kernel .:reduce_leading=repeat_back" \
                                                                || echo ".:attention=kernel")}
            python3 benchmarks/ab_step.py . $variants --device $device --config big --threads 16 --autocast f16 \
                --rounds ${AB_ROUNDS:-3} --steps 10 ;;
        *) echo "unknown verb: $verb"; exit 2 ;;
    esac
done
