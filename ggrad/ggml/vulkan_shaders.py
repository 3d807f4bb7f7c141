"""ggrad's Vulkan shaders of its kernels (ggrad/ggml/vulkan/*.comp), registered with GGML's Vulkan backend.

A shader computes on a Vulkan device what a kernel's custom node computes on the CPU. The pinned GGML has no
custom ops on Vulkan; scripts/patch_ggml_vulkan.py inserts a small hook into its Vulkan backend that records
a custom node whose CPU function has a registered shader into GGML's own command buffer, and
scripts/build_vulkan_shaders.sh compiles the shaders with glslc (`scripts/install.sh` does both where it
builds GGML with Vulkan). Without either, nothing is registered and the lowering keeps GGML's own ops.
"""

import functools
import os
import pathlib

from ._lib import ffi, lib
from .backend import backend_proc
from . import kernels

__all__ = ["SHADERS", "shader_dir", "registered"]

# kernel -> (its shader, the launch that gives the shader's push constants and workgroups, their words)
SHADERS = {"gelu_tanh_f32": ("gelu_tanh", "elementwise", 2),
           "gelu_tanh_back_f32": ("gelu_tanh_back", "elementwise", 2),
           "gelu_tanh_half": ("gelu_tanh_half", "elementwise_half", 3),
           "gelu_tanh_back_half": ("gelu_tanh_back_half", "elementwise_half", 3),
           "adamw_f32": ("adamw", "elementwise", 2),
           "nonfinite_f32": ("nonfinite", "nonfinite", 9),
           "layer_norm_f32": ("layer_norm", "rows", 3),
           "layer_norm_affine_f32": ("layer_norm_affine", "rows", 3),
           "layer_norm_back_f32": ("layer_norm_back", "rows", 3),
           "flash_attn": ("flash_attn", "flash", 33),
           "flash_attn_back": ("flash_attn_back", "flash_back", 33)}
_REGISTER = "int (*)(void *, const uint32_t *, size_t, uint32_t, void *)"


def shader_dir():
    """Where the compiled shaders (NAME.spv) are looked for: $GGRAD_VULKAN_SHADERS, else beside the sources."""
    return pathlib.Path(os.environ.get("GGRAD_VULKAN_SHADERS") or pathlib.Path(__file__).with_name("vulkan"))


@functools.lru_cache(maxsize=None)
def registered(backend_name="Vulkan"):
    """The kernels whose shaders run on `backend_name`'s devices (registered on first call): those of SHADERS
    whose SPIR-V is built, where GGML's Vulkan backend has ggrad's hook; else none."""
    if backend_name != "Vulkan":
        return frozenset()
    register = backend_proc("Vulkan", "ggrad_vk_register_custom", _REGISTER)
    if register is None:
        return frozenset()
    done = set()
    for name, (shader, launch, push_words) in SHADERS.items():
        path = shader_dir() / f"{shader}.spv"
        if not path.is_file():
            continue
        spirv = path.read_bytes()
        words = ffi.from_buffer("uint32_t[]", spirv)
        launch_fn = ffi.cast("void *", ffi.addressof(lib, f"ggrad_vk_launch_{launch}"))
        if register(ffi.cast("void *", kernels.cpu_function(name)), words, len(spirv) // 4, push_words, launch_fn):
            raise RuntimeError(f"GGML's Vulkan backend refused ggrad's shader of {name} ({path})")
        done.add(name)
    return frozenset(done)
