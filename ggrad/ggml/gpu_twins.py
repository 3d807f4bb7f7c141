"""ggrad's CUDA twins of its kernels (ggrad/ggml/cuda/twins.cu, flash_attn.cu), registered with GGML's CUDA
backend.

A twin computes on CUDA's stream what a kernel's custom node computes on the CPU. The pinned GGML runs
custom nodes on the CPU only; scripts/patch_ggml_cuda.py inserts a small hook into its CUDA backend that runs
a node whose CPU function has a registered twin, and scripts/build_cuda_twins.sh builds the twins with nvcc
(`scripts/install.sh` does both where it builds GGML with CUDA). Without either, nothing is registered and the
lowering keeps GGML's own ops: the wheel and CPU builds run as before.

With the twins, ggrad's overrides (cuda/overrides.cu) also take some of GGML's own nodes on CUDA (the hook
offers each node to them first): copies and conversions between float32 and the half types, and embedding
gradients (GET_ROWS_BACK), to the bit GGML's values, faster (GGRAD_CUDA_OVERRIDES=0 leaves them to GGML, for
benchmarks/gpu_run.sh's before-and-after).
"""

import ctypes
import functools
import os
import pathlib
import warnings

from ._lib import ffi
from .backend import backend_proc
from . import kernels

__all__ = ["TWINS", "OVERRIDES", "library_path", "registered"]

TWINS = ("matmul_half", "gelu_tanh_f32", "gelu_tanh_back_f32", "gelu_tanh_half",   # kernels with a CUDA twin
         "gelu_tanh_back_half", "layer_norm_f32", "layer_norm_back_f32", "layer_norm_affine_f32", "flash_attn",
         "flash_attn_back", "concat_f32", "adamw_f32", "nonfinite_f32")
OVERRIDES = "override"   # the entry the hook offers GGML's nodes to (ggrad_cuda_override), registered with the twins
_REGISTER = "int (*)(void *, void *)"
_REGISTER_OVERRIDE = "void (*)(void *)"


def library_path():
    """Where the twins' shared library is looked for: $GGRAD_CUDA_TWINS, else beside this module."""
    return pathlib.Path(os.environ.get("GGRAD_CUDA_TWINS") or pathlib.Path(__file__).with_name("_cuda_twins.so"))


@functools.lru_cache(maxsize=None)
def registered(backend_name="CUDA"):
    """The kernels whose twins run on `backend_name`'s devices (registered on first call): all of TWINS
    where GGML's CUDA backend has ggrad's hook and the library is built, else none; with them OVERRIDES
    (GGML's nodes offered to ggrad_cuda_override first), where the hook has that entry."""
    if backend_name != "CUDA":
        return frozenset()
    register = backend_proc("CUDA", "ggrad_cuda_register_custom", _REGISTER)
    gemm = backend_proc("CUDA", "ggrad_cuda_gemm_half", "void *")
    register_override = backend_proc("CUDA", "ggrad_cuda_register_override", _REGISTER_OVERRIDE)
    path = library_path()
    if register is None or gemm is None or not path.is_file():
        return frozenset()
    twins = ctypes.CDLL(str(path))
    error = twins.ggrad_cuda_twins_init(ctypes.c_void_p(int(ffi.cast("uintptr_t", gemm))))
    if error:   # built for another GPU architecture: a launch would fail inside GGML's compute, which aborts
        warnings.warn(f"ggrad's CUDA twins ({path}) have no code for this GPU (CUDA error {error}); GGML's own "
                      "ops serve. Rebuild them with CUDA_ARCHS set to its architecture (scripts/build_cuda_twins.sh)")
        return frozenset()
    for name in TWINS:
        address = ctypes.cast(getattr(twins, f"ggrad_cuda_{name}"), ctypes.c_void_p).value
        if register(ffi.cast("void *", kernels.cpu_function(name)), ffi.cast("void *", address)) != 0:
            raise RuntimeError(f"GGML's CUDA backend refused ggrad's twin of {name}: its table is full")
    if register_override is None or os.environ.get("GGRAD_CUDA_OVERRIDES") == "0":
        return frozenset(TWINS)   # ctypes never unloads the library: GGML may call into it until exit
    register_override(ffi.cast("void *", ctypes.cast(twins.ggrad_cuda_override, ctypes.c_void_p).value))
    return frozenset(TWINS + (OVERRIDES,))
