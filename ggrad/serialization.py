"""`ggrad.save(obj, path)` / `ggrad.load(path)`: checkpoints of state dicts without pickle, and of whole
objects (modules) with PyTorch's safety model.

A path ending in `.gguf` is a GGUF file (GGML's format; see `serialization_gguf`). Otherwise a
checkpoint is a numpy `.npz` archive: every Tensor and numpy array is one member (`a0`, `a1`, ...),
and the structure around them (nested dicts, lists, tuples, numbers, strings, None) is JSON in the
member `__ggrad__`. Such a file holds no pickle at all. An object beyond that (a Module, any class
instance) is pickled into the member `__pickle__`, its tensors still members of their own (a tensor
held twice, as tied weights, is stored once and loads as one tensor). Loading reads that pickle
weights-only by default (`serialization_unpickler`: only allowed classes are built, nothing is
imported); Python's unpickler runs only with `weights_only=False`, the explicit opt-in for trusted files.
Saving writes a temporary file in the same directory, fsyncs it and renames it over the target
(`ggml.files.atomic_write`): an interrupted save leaves the previous file intact.
Before numpy reads a member, its .npy header is checked against the archive's own sizes (`_check_members`),
so a small hostile file cannot make load allocate or inflate far more than the file holds.
"""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import sys
import zipfile
from typing import Any

import numpy as np

from .autograd import Parameter, Tensor
from .autograd.complex_tensor import ComplexTensor, view_as_complex
from .autograd.factory import tensor
from .autograd.raw import from_raw, to_raw
from .autograd.typing_aliases import DeviceLike
from . import ggml
from . import serialization_gguf
from .ggml.errors import FormatError
from .ggml.files import atomic_write
from .serialization_unpickler import (add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals,
                                      unsafe_globals, weights_only_load)

__all__ = ["save", "load", "add_safe_globals", "clear_safe_globals", "get_safe_globals", "safe_globals",
           "get_unsafe_globals_in_checkpoint"]

FORMAT = "ggrad.save"
VERSION = 2   # 2: a whole object may be pickled (the root node {"pickle": member}); 1: plain data only
_META = "__ggrad__"
_PICKLE = "__pickle__"
# ggrad.save stores members uncompressed; a deflated member may expand at most this much (deflate's own
# limit is about 1032:1; weights compress far less). Beyond it the file is refused as a decompression bomb.
MAX_EXPANSION = 100


# ---- encoding ----------------------------------------------------------------------------------
class _NotPlain(TypeError):
    """An object the JSON structure cannot hold: `save` pickles the whole object instead."""


class _Encoder:
    """Turns an object tree into JSON-able nodes and a list of arrays."""

    def __init__(self):
        self.arrays = {}

    def _array(self, array):
        name = f"a{len(self.arrays)}"
        self.arrays[name] = np.asarray(array)
        return name

    def encode(self, obj, where):
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return obj
        if isinstance(obj, float):
            return {"float": repr(obj)} if not np.isfinite(obj) else obj
        if isinstance(obj, Tensor):
            if obj.dtype.is_quantized:   # GGML's blocks as bytes: numpy() would dequantize
                node = {"tensor": self._array(to_raw(obj)), "dtype": obj.dtype.name, "shape": list(obj.shape)}
            else:
                node = {"tensor": self._array(obj.detach().numpy()), "dtype": obj.dtype.name}
            if obj.requires_grad:
                node["requires_grad"] = True
            if isinstance(obj, Parameter):
                node["parameter"] = True
            return node
        if isinstance(obj, ComplexTensor):   # complex64 values, one member
            node = {"complex": self._array(obj.detach().numpy())}
            if obj.requires_grad:
                node["requires_grad"] = True
            return node
        if isinstance(obj, np.ndarray):
            if obj.dtype.kind not in "biufc":
                raise TypeError(f"ggrad.save: cannot save a numpy array of dtype {obj.dtype} at {where} "
                                "(only numeric and bool arrays)")
            return {"ndarray": self._array(obj)}
        if isinstance(obj, np.generic):
            return {"npscalar": self._array(np.asarray(obj))}
        if isinstance(obj, dict):
            items = []
            for key, value in obj.items():
                if not (key is None or isinstance(key, (str, int, float, bool))):
                    raise _NotPlain(f"ggrad.save: dict keys must be str, int, float, bool or None; got "
                                    f"{type(key).__name__} at {where}")
                items.append([key, self.encode(value, f"{where}[{key!r}]")])
            return {"dict": items}
        if isinstance(obj, (list, tuple)):
            values = [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]
            return {"list": values} if isinstance(obj, list) else {"tuple": values}
        raise _NotPlain(f"ggrad.save: an object of type {type(obj).__name__} at {where} is pickled")


class _Pickler(pickle.Pickler):
    """Pickles an object with its Tensors, numpy arrays and numpy scalars stored as archive members: each is
    replaced by its structure node, the same node for the same object."""

    def __init__(self, file, encoder, protocol):
        super().__init__(file, protocol=protocol)
        self.encoder, self.nodes = encoder, {}

    def persistent_id(self, obj):
        if not isinstance(obj, (Tensor, ComplexTensor, np.ndarray, np.generic)):
            return None
        if id(obj) not in self.nodes:
            # obj is kept alive with its node, so no later object gets its id
            self.nodes[id(obj)] = (obj, self.encoder.encode(obj, type(obj).__name__))
        return self.nodes[id(obj)][1]


def _pickled(obj, protocol):
    """The members of a checkpoint holding `obj` pickled (its arrays as members of their own)."""
    encoder = _Encoder()
    buffer = io.BytesIO()
    try:
        _Pickler(buffer, encoder, protocol).dump(obj)
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        raise TypeError(f"ggrad.save: cannot pickle {type(obj).__name__}: {e}") from e
    members = dict(encoder.arrays)
    members[_PICKLE] = np.frombuffer(buffer.getvalue(), dtype=np.uint8)
    return {"pickle": _PICKLE}, members


def _decode(node, arrays, device, path):
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list) or not isinstance(node, dict) or len(node) == 0:
        raise FormatError(f"ggrad.load: {path} is corrupt (unexpected structure node {node!r:.80})")
    if "tensor" in node:
        if "shape" in node:
            t = _quantized(_member(arrays, node["tensor"], path), node, device, path)
        else:
            t = tensor(_member(arrays, node["tensor"], path, _NUMBERS), dtype=node["dtype"], device=device)
        if node.get("parameter"):
            return Parameter(t, requires_grad=bool(node.get("requires_grad")))
        return t.requires_grad_(True) if node.get("requires_grad") else t
    if "complex" in node:
        values = _member(arrays, node["complex"], path, "c").astype(np.complex64)
        z = view_as_complex(tensor(np.stack([values.real, values.imag], -1), device=device)).detach()
        return z.requires_grad_(True) if node.get("requires_grad") else z
    if "ndarray" in node:
        return _member(arrays, node["ndarray"], path, _ARRAYS)
    if "npscalar" in node:
        return _member(arrays, node["npscalar"], path, _ARRAYS)[()]
    if "float" in node:
        return float(node["float"])
    if "dict" in node:
        return {key: _decode(value, arrays, device, path) for key, value in node["dict"]}
    if "list" in node:
        return [_decode(v, arrays, device, path) for v in node["list"]]
    if "tuple" in node:
        return tuple(_decode(v, arrays, device, path) for v in node["tuple"])
    raise FormatError(f"ggrad.load: {path} is corrupt (unknown structure node with keys {sorted(node)})")


def _quantized(raw, node, device, path):
    """A quantized tensor from its stored bytes, their count checked against its type and shape."""
    dtype, shape = ggml.as_dtype(node["dtype"]), tuple(int(s) for s in node["shape"])
    rows = math.prod(shape[:-1]) if shape else 0
    if not dtype.is_quantized or not shape or shape[-1] % dtype.block_size or raw.dtype != np.uint8 \
            or raw.size != rows * (shape[-1] // dtype.block_size) * dtype.type_size:
        raise FormatError(f"ggrad.load: {path} is corrupt ({raw.size} bytes do not hold a {dtype.name} tensor of "
                         f"shape {shape})")
    return from_raw(raw, dtype, shape, device)


_NUMBERS = "biuf"    # the numpy kinds a tensor member holds (bool, ints, floats)
_ARRAYS = "biufc"    # and a saved numpy array (`_Encoder.encode` refuses the others)


def _member(arrays, name, path, kinds=None):
    """The array member `name`; FormatError naming the file and the member where it is missing or, with
    `kinds`, holds values of another numpy kind (strings, objects, dates: never written by `save`)."""
    if not isinstance(name, str) or name not in arrays:
        raise FormatError(f"ggrad.load: {path} is corrupt (array member {name!r} is missing)")
    array = arrays[name]
    if kinds is not None and array.dtype.kind not in kinds:
        raise FormatError(f"ggrad.load: {path} is corrupt (member {name!r} holds {array.dtype} values, not "
                          "numbers)")
    return array


# ---- files -------------------------------------------------------------------------------------
def _check_members(source, name):
    """Refuse an archive whose members claim more bytes than they can honestly hold: a member inflating
    beyond MAX_EXPANSION times its compressed size, or an .npy header whose shape and dtype do not
    account for exactly the member's declared size. Reads only the headers."""
    try:
        archive = zipfile.ZipFile(source)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return   # not a zip archive: np.load says what it is
    with archive:
        for info in archive.infolist():
            if info.compress_type != zipfile.ZIP_STORED and \
                    info.file_size > MAX_EXPANSION * info.compress_size + 4096:
                raise FormatError(f"ggrad.load: {name} is refused: member {info.filename!r} would inflate "
                                 f"{info.compress_size} bytes to {info.file_size} (more than {MAX_EXPANSION}x; "
                                 "ggrad.save never compresses): a decompression bomb or a damaged file")
            if not info.filename.endswith(".npy"):
                continue
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                               else np.lib.format.read_array_header_2_0)
                shape, _, dtype = read_header(member, max_header_size=10000)
                header = member.tell()
            count = 1
            for n in shape:
                count *= int(n)
            if dtype.hasobject or header + count * dtype.itemsize != info.file_size:
                raise FormatError(f"ggrad.load: {name} is corrupt: member {info.filename!r} declares shape "
                                 f"{tuple(shape)} of {dtype} ({count * dtype.itemsize} bytes) but holds "
                                 f"{info.file_size - header}")


def _is_gguf(path):
    return not hasattr(path, "write") and not hasattr(path, "read") and os.fspath(path).endswith(".gguf")


def save(obj: Any, path: str | os.PathLike[str], pickle_protocol: int = 4) -> None:
    """Write `obj` to `path`: a state dict (nested dicts/lists of Tensors, arrays, numbers, strings) as plain
    data, anything else (a whole Module, an optimizer, any picklable object) pickled with its tensors beside it.

    The write is atomic: a temporary file in the same directory, flushed and fsynced, then renamed over
    `path`. Tensors are computed (realized) as they are read. A `.gguf` path writes GGUF.
    `pickle_protocol` (2 to 5) is used only for a pickled object.
    """
    if _is_gguf(path):
        return serialization_gguf.save(obj, path)
    if not isinstance(pickle_protocol, int) or not 2 <= pickle_protocol <= pickle.HIGHEST_PROTOCOL:
        raise ValueError(f"ggrad.save: pickle_protocol must be 2 to {pickle.HIGHEST_PROTOCOL}, got {pickle_protocol!r}")
    encoder = _Encoder()
    try:
        root, members, version = encoder.encode(obj, "obj"), dict(encoder.arrays), 1
    except _NotPlain:
        (root, members), version = _pickled(obj, pickle_protocol), VERSION
    structure = {"format": FORMAT, "version": version, "root": root}
    members[_META] = np.frombuffer(json.dumps(structure).encode("utf-8"), dtype=np.uint8)
    if hasattr(path, "write"):
        np.savez(path, **members)
        return
    with atomic_write(path) as f:
        np.savez(f, **members)


def load(path: str | os.PathLike[str], map_location: DeviceLike | None = None, dequantize: bool = False,
         metadata: bool = False, *, weights_only: bool | None = None, mmap: bool | None = None) -> Any:
    """Read what `save` wrote. Tensors are created on `map_location` (a device; default CPU).

    A pickled object (a whole Module) is read weights-only unless `weights_only=False`: only classes and
    functions allowed by `add_safe_globals` / `safe_globals` (and ggrad's dtypes, devices, OrderedDict,
    set) are built, anything else raises pickle.UnpicklingError naming it. `weights_only=False` runs
    Python's unpickler, which can run any code the file names: only for files you trust. `mmap` is
    accepted as PyTorch's (tensors are copied into GGML's buffers either way, so it changes nothing).
    Raises FileNotFoundError for a missing file and FormatError (a ValueError), naming the path, for a file
    that is not a ggrad checkpoint or is damaged or crafted (a member of strings or objects, say). A `.gguf`
    path reads any GGUF file (`serialization_gguf.load`: `dequantize` and `metadata` apply to those only).
    """
    if weights_only not in (None, True, False) or mmap not in (None, True, False):
        raise TypeError(f"ggrad.load: weights_only and mmap must be bool or None, got {weights_only!r}, {mmap!r}")
    if _is_gguf(path):
        return serialization_gguf.load(path, map_location, dequantize=dequantize, metadata=metadata)
    structure, arrays, name = _read(path)
    try:
        if structure["root"] == {"pickle": _PICKLE}:
            return _unpickle(arrays, map_location, name, weights_only is not False)
        return _decode(structure["root"], arrays, map_location, name)
    except RecursionError:
        raise FormatError(f"ggrad.load: {name} is corrupt (its structure is nested deeper than Python's recursion "
                          f"limit, {sys.getrecursionlimit()})") from None
    except FormatError:
        raise
    except (KeyError, TypeError, ValueError) as e:   # a structure node of the wrong kind or dtype
        raise FormatError(f"ggrad.load: {name} is corrupt ({type(e).__name__}: {e})") from e


def get_unsafe_globals_in_checkpoint(f: str | os.PathLike[str]) -> list[str]:
    """The classes and functions (`module.qualname`) a checkpoint names that a weights-only load would
    refuse; its pickle is read, never run (torch.serialization.get_unsafe_globals_in_checkpoint)."""
    structure, arrays, _ = _read(f)
    return unsafe_globals(arrays[_PICKLE].tobytes()) if _PICKLE in arrays else []


def _unpickle(arrays, device, name, weights_only):
    """The pickled object of a checkpoint; its tensors come from the archive, each once."""
    if _PICKLE not in arrays:
        raise FormatError(f"ggrad.load: {name} is corrupt (member {_PICKLE} is missing)")
    loaded = {}

    def persistent_load(node):
        key = json.dumps(node, sort_keys=True)
        if key not in loaded:
            loaded[key] = _decode(node, arrays, device, name)
        return loaded[key]

    data = arrays[_PICKLE].tobytes()
    if weights_only:
        return weights_only_load(data, persistent_load, name)
    unpickler = pickle.Unpickler(io.BytesIO(data))
    unpickler.persistent_load = persistent_load
    return unpickler.load()


def _read(path):
    """(structure, arrays, name) of a ggrad archive, its members checked before numpy reads them."""
    name = getattr(path, "name", "a file object") if hasattr(path, "read") else os.fspath(path)
    try:
        start = path.tell() if hasattr(path, "read") else None
        try:
            _check_members(path, name)
        finally:
            if start is not None:
                path.seek(start)
        archive = np.load(path, allow_pickle=False)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, SyntaxError) as e:
        if isinstance(e, FormatError):
            raise
        raise FormatError(f"ggrad.load: {name} is not a ggrad checkpoint (not a readable .npz archive: {e})") from e
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise FormatError(f"ggrad.load: {name} is not a ggrad checkpoint (a bare .npy array, not an archive)")
    with archive:
        if _META not in archive.files:
            raise FormatError(f"ggrad.load: {name} is not a ggrad checkpoint (no {_META} member; was it written "
                             "by ggrad.save?)")
        try:
            structure = json.loads(archive[_META].tobytes().decode("utf-8"))
            arrays = {k: archive[k] for k in archive.files if k != _META}
        except RecursionError:
            raise FormatError(f"ggrad.load: {name} is corrupt (its structure is nested deeper than Python's "
                             f"recursion limit, {sys.getrecursionlimit()}; ggrad.save never writes that)") from None
        except (OSError, ValueError, EOFError, KeyError, UnicodeDecodeError, zipfile.BadZipFile) as e:
            raise FormatError(f"ggrad.load: {name} is corrupt ({type(e).__name__}: {e})") from e
    if not isinstance(structure, dict) or structure.get("format") != FORMAT or "root" not in structure:
        raise FormatError(f"ggrad.load: {name} is not a ggrad checkpoint (unknown format header)")
    if not isinstance(structure.get("version"), int) or structure["version"] > VERSION:
        raise FormatError(f"ggrad.load: {name} has format version {structure.get('version')!r}; this ggrad reads "
                         f"versions up to {VERSION}")
    return structure, arrays, name
