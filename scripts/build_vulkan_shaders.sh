#!/usr/bin/env bash
# Compile ggrad's Vulkan shaders (ggrad/ggml/vulkan/*.comp) to SPIR-V, NAME.spv, which ggrad registers with
# GGML's Vulkan backend (ggrad/ggml/vulkan_shaders.py); the backend must carry ggrad's hook
# (scripts/patch_ggml_vulkan.py, which scripts/install.sh applies where it builds GGML with Vulkan).
#
#   scripts/build_vulkan_shaders.sh [OUTPUT_DIR]     # default: ggrad/ggml/vulkan; glslc: $GLSLC, else PATH's
set -euo pipefail

cd "$(dirname "$0")/.."
output=${1:-ggrad/ggml/vulkan}
glslc=${GLSLC:-glslc}
mkdir -p "${output}"
for source in ggrad/ggml/vulkan/*.comp; do
    name=$(basename "${source}" .comp)
    "${glslc}" --target-env=vulkan1.2 -O -o "${output}/${name}.spv" "${source}"
done
echo "build_vulkan_shaders.sh: ggrad's shaders into ${output}"
