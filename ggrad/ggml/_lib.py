"""The one module that imports the compiled binding; everything else does `from ._lib import ffi, lib`.

pip builds the extension in an isolated environment, so the rpath baked into it may point at a libggml
copy that no longer exists. The installed `libggml` package's libraries are therefore loaded first
(globally), which satisfies the extension's dependencies by soname and makes a source build of
libggml-python (RPC, CUDA, Vulkan) installed later take effect without rebuilding ggrad.

`GGRAD_GGML_LIB_DIR=/path` loads GGML from that directory instead of the installed package, without
reinstalling anything: e.g. a CMake build tree of the same GGML version (`GGRAD_GGML_LIB_DIR=build/src`).
The directory is searched recursively for `libggml-base.so`, `libggml-cpu.so` and `libggml.so` (a build
tree puts them in `src/`, `src/ggml-cpu/`; the shallowest match wins); backends that `libggml.so` links
(CUDA, Vulkan, RPC) come with it. A directory lacking one of them raises ImportError.
"""

import ctypes
import importlib.util
import os
from pathlib import Path

_NAMES = ("libggml-base.so", "libggml-cpu.so", "libggml.so")


def _libggml_dir():
    spec = importlib.util.find_spec("libggml")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("ggrad needs libggml-python==0.20.2.post1 (pip install libggml-python==0.20.2.post1)")
    root = Path(list(spec.submodule_search_locations)[0])
    for name in ("lib", "lib64"):
        if (root / name / "libggml-base.so").exists():
            return root / name
    raise ImportError(f"libggml-python is installed at {root} but holds no libggml-base.so")


def _override_paths(root):
    """The three libraries under `root` (GGRAD_GGML_LIB_DIR), searched recursively."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise ImportError(f"GGRAD_GGML_LIB_DIR={str(root)!r} is not a directory")
    paths, missing = [], []
    for name in _NAMES:
        found = sorted(root.rglob(name), key=lambda p: (len(p.parts), str(p)))
        if found:
            paths.append(found[0])
        else:
            missing.append(name)
    if missing:
        raise ImportError(f"GGRAD_GGML_LIB_DIR={str(root)!r} holds no {', '.join(missing)} "
                          f"(point it at a GGML build or lib directory, or unset it to use the installed libggml)")
    return root, paths


def _preload():
    override = os.environ.get("GGRAD_GGML_LIB_DIR")
    if override:
        lib_dir, paths = _override_paths(override)
    else:
        lib_dir = _libggml_dir()
        paths = [lib_dir / name for name in _NAMES]
    for path in paths:
        try:
            ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            raise ImportError(f"could not load GGML library {path}: {e}") from e
    return lib_dir


LIB_DIR = _preload()

from ._ffi import ffi, lib  # noqa: E402  (must follow the preload)

__all__ = ["ffi", "lib", "LIB_DIR"]
