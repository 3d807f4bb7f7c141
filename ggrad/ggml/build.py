"""What the loaded GGML was built with, as GGML itself reports it: version, backends, CPU features.

The CPU backend lists its compile-time features through the registry (`ggml_backend_get_features`):
instruction sets (`AVX2`, `AVX512`, ...), `LLAMAFILE` (the tiled matmul kernels) and `OPENMP` (OpenMP
threads instead of GGML's own pool). A build from the sdist with `-DGGML_NATIVE=ON` shows every instruction
set of the machine it was built on; the PyPI wheel is built for generic x86-64 with AVX2.
"""

from ._lib import LIB_DIR, ffi, lib
from .backend import backend_proc
from . import vulkan_shaders
from .gpu_twins import registered

_FEATURES_SIGNATURE = "struct ggml_backend_feature * (*)(ggml_backend_reg_t)"


def backend_features(backend_name="CPU"):
    """{feature: value} that a registered backend reports (`{"AVX2": "1", ...}`); {} if it reports none."""
    get_features = backend_proc(backend_name, "ggml_backend_get_features", _FEATURES_SIGNATURE)
    if get_features is None:
        return {}
    features = get_features(lib.ggml_backend_reg_by_name(backend_name.encode()))
    found = {}
    i = 0
    while features != ffi.NULL and features[i].name != ffi.NULL:
        found[ffi.string(features[i].name).decode()] = ffi.string(features[i].value).decode()
        i += 1
    return found


def registered_backends():
    """Names of the registered backends (`CPU`, `RPC`, `CUDA`, ...), in registry order."""
    return [ffi.string(lib.ggml_backend_reg_name(lib.ggml_backend_reg_get(i))).decode()
            for i in range(lib.ggml_backend_reg_count())]


def build_info():
    """The loaded GGML build: version, library directory, backends, CPU features, and a one-line summary.

    `llamafile` and `openmp` say whether the CPU backend has the llamafile matmul kernels and OpenMP threads;
    `cuda_twins` lists ggrad's kernels that run on CUDA devices (gpu_twins.py; none without the patched build),
    `vulkan_shaders` those that run on Vulkan devices (vulkan_shaders.py; likewise).
    """
    cpu = backend_features("CPU")
    backends = registered_backends()
    version = ffi.string(lib.ggml_version()).decode()
    flags = [name if value == "1" else f"{name}={value}" for name, value in cpu.items()]
    return {
        "version": version,
        "library": str(LIB_DIR),
        "backends": backends,
        "cpu_features": cpu,
        "llamafile": "LLAMAFILE" in cpu,
        "openmp": "OPENMP" in cpu,
        "cuda_twins": sorted(registered("CUDA")),
        "vulkan_shaders": sorted(vulkan_shaders.registered("Vulkan")),
        "summary": f"GGML {version}; backends {', '.join(backends)}; CPU {' '.join(flags)}",
    }
