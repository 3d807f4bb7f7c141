#!/usr/bin/env bash
# GGML's Vulkan backend on this machine's CPU (Mesa's lavapipe), to run tests/gpu's Vulkan cases without a GPU:
#
#   bash benchmarks/lavapipe.sh [PYTEST ARGS]      # default: tests/gpu
#
# Installs lavapipe from Debian 12's backports (Mesa 25; Debian 12's own Mesa 22.3 crashed at random in
# long runs, GGML's own test-backend-ops too) and glslc (apt), takes Debian 13's Vulkan headers from .gpu/deb13
# (`bash benchmarks/gpu_run.sh prepare` fetches them: Debian 12's are too old for GGML's Vulkan backend),
# builds the pinned GGML with Vulkan into /tmp/ggml-vulkan once (about 8 minutes on 2 cores) and runs pytest
# on it (GGML lists a CPU-type Vulkan device only when GGML_VK_VISIBLE_DEVICES names it). It checks behaviour
# (splits, replays, values), never speed: lavapipe runs the shaders on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
SDIST=libggml_python-0.20.2.post1
PYTHON=${PYTHON:-python}
BUILD=${LAVAPIPE_BUILD:-/tmp/ggml-vulkan}   # where the build is kept between runs

# a build from before ggrad's Vulkan hook (scripts/patch_ggml_vulkan.py) is made again
if ! grep -q ggrad_vk_register_custom $BUILD/src/ggml-vulkan/libggml-vulkan.so 2>/dev/null; then
    [ -d .gpu/deb13 ] || { echo "lavapipe.sh: no .gpu/deb13: run 'bash benchmarks/gpu_run.sh prepare' first" >&2; exit 1; }
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian" \
         "bookworm-backports main" >/etc/apt/sources.list.d/bookworm-backports.list
    apt-get update -q >/dev/null
    apt-get install -y -q -t bookworm-backports mesa-vulkan-drivers >/dev/null
    apt-get install -y -q glslc ninja-build >/dev/null
    mkdir -p /tmp/vk13 && for deb in .gpu/deb13/libvulkan-dev_*.deb .gpu/deb13/spirv-headers_*.deb; do
        dpkg -x "$deb" /tmp/vk13
    done
    rm -rf /tmp/$SDIST && tar xzf .gpu/$SDIST.tar.gz -C /tmp
    "$PYTHON" scripts/patch_ggml_vulkan.py /tmp/$SDIST/ggml
    cmake -S /tmp/$SDIST/ggml -B $BUILD -G Ninja -DGGML_VULKAN=ON -DGGML_RPC=ON -DGGML_NATIVE=OFF \
        -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH=/tmp/vk13/usr -DVulkan_INCLUDE_DIR=/tmp/vk13/usr/include \
        -DVulkan_LIBRARY=/usr/lib/x86_64-linux-gnu/libvulkan.so.1 -DVulkan_GLSLC_EXECUTABLE=/usr/bin/glslc \
        >/tmp/cmake-lavapipe.log 2>&1 || { tail -20 /tmp/cmake-lavapipe.log; exit 1; }
    ninja -C $BUILD >/tmp/ninja-lavapipe.log 2>&1 || { tail -20 /tmp/ninja-lavapipe.log; rm -rf $BUILD; exit 1; }
fi
bash scripts/build_vulkan_shaders.sh >/dev/null   # ggrad's shaders, registered with the hook
export GGRAD_GGML_LIB_DIR=$BUILD/src GGML_VK_VISIBLE_DEVICES=0
"$PYTHON" -m pytest -q -p no:cacheprovider "${@:-tests/gpu}"
