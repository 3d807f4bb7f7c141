"""The one module that imports the compiled binding; everything else does `from ._lib import ffi, lib`.

pip builds the extension in an isolated environment, so the rpath baked into it may point at a libggml
copy that no longer exists. The installed `libggml` package's libraries are therefore loaded first
(globally), which satisfies the extension's dependencies by soname and makes a source build of
libggml-python (RPC, CUDA, Vulkan) installed later take effect without rebuilding ggrad.
"""

import ctypes
import importlib.util
from pathlib import Path


def _libggml_dir():
    spec = importlib.util.find_spec("libggml")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("ggrad needs libggml-python==0.20.2.post1 (pip install libggml-python==0.20.2.post1)")
    root = Path(list(spec.submodule_search_locations)[0])
    for name in ("lib", "lib64"):
        if (root / name / "libggml-base.so").exists():
            return root / name
    raise ImportError(f"libggml-python is installed at {root} but holds no libggml-base.so")


def _preload():
    lib_dir = _libggml_dir()
    for name in ("libggml-base.so", "libggml-cpu.so", "libggml.so"):
        ctypes.CDLL(str(lib_dir / name), mode=ctypes.RTLD_GLOBAL)
    return lib_dir


LIB_DIR = _preload()

from ._ffi import ffi, lib  # noqa: E402  (must follow the preload)

__all__ = ["ffi", "lib", "LIB_DIR"]
