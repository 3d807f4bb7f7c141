"""GGUF files through GGML's own gguf API: `read(path)` and `write(path, metadata, tensors)`.

Reading. GGML 0.20.2's `gguf_init_from_file` bounds every count, array and string by the bytes left in
the file before it allocates (it reads through a reader that knows the remaining size), checks the
magic, version, key types, the alignment, tensor names, dimensions, types, row/block sizes, overflow of
element and byte counts, and that tensor offsets are consecutive; it returns NULL (never aborts) on
failure. It does NOT check that the data section lies inside the file when, as here, it is asked for
metadata only (`no_alloc`, no ggml context: so a hostile tensor count cannot make it reserve tensor
metadata either), and its element-count overflow check is skipped when the product of the dimensions
wraps around to 0 (e.g. ne = [2**40, 2**40]). So, around it:
  - before: the header (magic, version, counts) is parsed here, and the counts are checked against the
    file size, which gives clear messages for foreign and truncated files;
  - during: GGML's error lines are captured and put into the exception;
  - after: every tensor's element count and extent are recomputed with Python integers and checked
    against the file size, strings are decoded as UTF-8, and tensor bytes are read here (numpy) only
    after that check.
Every failure raises `FormatError` (a ValueError) naming the file. Embedded NUL bytes in keys or strings
end them, as GGML exposes them as C strings.

Writing. The metadata and tensor infos are laid out by GGML (`gguf_set_*`, `gguf_add_tensor`,
`gguf_get_meta_data`); the tensor bytes follow, each padded to the alignment as GGML does, written
atomically (`files.atomic_write`). Everything GGML would assert on (empty or duplicate names, names of
64 bytes or more, a bad `general.alignment`) is checked first.

Metadata values: a GGUF integer or float scalar reads as the numpy scalar of its exact type, bool as
bool, string as str, an array as a 1-D numpy array (bool arrays as numpy bool), a string array as a
list of str. Writing takes the same, plus Python int (i64), float (f64), and lists of int/float/bool.
"""

import math
import os
import struct

import numpy as np

from ._lib import ffi, lib
from . import dtypes, hooks
from .context import Context
from .errors import FormatError
from .files import atomic_write

ALIGNMENT = lib.GGUF_DEFAULT_ALIGNMENT
_MAX_NAME = lib.GGML_MAX_NAME
_HEADER = struct.Struct("<4sIqq")            # magic, version, n_tensors, n_kv
_MIN_KV_BYTES = 8 + 1 + 4 + 1                 # key length, a 1-byte key, type, a 1-byte value
_MIN_TENSOR_BYTES = 8 + 4 + 4 + 8             # name length, n_dims, type, offset

_NUMPY_OF = {lib.GGUF_TYPE_UINT8: np.uint8, lib.GGUF_TYPE_INT8: np.int8, lib.GGUF_TYPE_UINT16: np.uint16,
             lib.GGUF_TYPE_INT16: np.int16, lib.GGUF_TYPE_UINT32: np.uint32, lib.GGUF_TYPE_INT32: np.int32,
             lib.GGUF_TYPE_FLOAT32: np.float32, lib.GGUF_TYPE_UINT64: np.uint64, lib.GGUF_TYPE_INT64: np.int64,
             lib.GGUF_TYPE_FLOAT64: np.float64, lib.GGUF_TYPE_BOOL: np.bool_}
_GGUF_OF = {np.dtype(v): k for k, v in _NUMPY_OF.items()}
_SETTERS = {lib.GGUF_TYPE_UINT8: lib.gguf_set_val_u8, lib.GGUF_TYPE_INT8: lib.gguf_set_val_i8,
            lib.GGUF_TYPE_UINT16: lib.gguf_set_val_u16, lib.GGUF_TYPE_INT16: lib.gguf_set_val_i16,
            lib.GGUF_TYPE_UINT32: lib.gguf_set_val_u32, lib.GGUF_TYPE_INT32: lib.gguf_set_val_i32,
            lib.GGUF_TYPE_FLOAT32: lib.gguf_set_val_f32, lib.GGUF_TYPE_UINT64: lib.gguf_set_val_u64,
            lib.GGUF_TYPE_INT64: lib.gguf_set_val_i64, lib.GGUF_TYPE_FLOAT64: lib.gguf_set_val_f64,
            lib.GGUF_TYPE_BOOL: lib.gguf_set_val_bool}


class TensorInfo:
    """Where one tensor of a GGUF file is: name, DType, GGML `ne` (4 values), absolute offset, byte size."""

    __slots__ = ("name", "dtype", "ne", "offset", "nbytes")

    def __init__(self, name, dtype, ne, offset, nbytes):
        self.name, self.dtype, self.ne, self.offset, self.nbytes = name, dtype, ne, offset, nbytes

    @property
    def shape(self):
        """numpy-order shape, trailing GGML dims of 1 dropped (GGML does not report n_dims)."""
        ne = list(self.ne)
        while len(ne) > 1 and ne[-1] == 1:
            ne.pop()
        return tuple(reversed(ne))

    def __repr__(self):
        return f"TensorInfo({self.name!r}, {self.dtype.name}, ne={list(self.ne)}, offset={self.offset})"


class GGUFFile:
    """The metadata of a validated GGUF file; `read_data(info)` reads one tensor's bytes.

    Attributes:
        path, size (bytes), version, alignment, data_offset,
        metadata: dict key -> value (see the module docstring),
        tensors: list of TensorInfo in file order (`by_name` indexes them).
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        with open(self.path, "rb") as f:   # FileNotFoundError / IsADirectoryError / PermissionError as is
            self.size = os.fstat(f.fileno()).st_size
            head = f.read(_HEADER.size)
        self._check_header(head)
        with hooks.capture_errors() as errors:
            params = ffi.new("struct gguf_init_params *", {"no_alloc": True, "ctx": ffi.NULL})
            ptr = lib.gguf_init_from_file(os.fsencode(self.path), params[0])
        if ptr == ffi.NULL:
            detail = "; ".join(line for line in errors if line) or "GGML could not parse it"
            raise self._error(f"is not a valid GGUF file ({detail})")
        ctx = ffi.gc(ptr, lib.gguf_free)
        self.version = int(lib.gguf_get_version(ctx))
        self.alignment = int(lib.gguf_get_alignment(ctx))
        self.data_offset = int(lib.gguf_get_data_offset(ctx))
        self.metadata = {}
        for i in range(lib.gguf_get_n_kv(ctx)):
            key = self._text(lib.gguf_get_key(ctx, i), f"key {i}")
            self.metadata[key] = self._value(ctx, i, key)
        self.tensors = [self._tensor(ctx, i) for i in range(lib.gguf_get_n_tensors(ctx))]
        self.by_name = {t.name: t for t in self.tensors}

    def _error(self, what):
        return FormatError(f"{self.path} {what}")

    def _check_header(self, head):
        if len(head) < 4 or head[:4] != b"GGUF":
            raise self._error(f"is not a GGUF file (it starts with {head[:4]!r}, not b'GGUF')")
        if len(head) < _HEADER.size:
            raise self._error(f"is truncated: {self.size} bytes, shorter than a GGUF header ({_HEADER.size})")
        _, version, n_tensors, n_kv = _HEADER.unpack(head)
        if version not in (2, 3):
            raise self._error(f"has GGUF version {version}; GGML {ffi.string(lib.ggml_version()).decode()} "
                              f"reads versions 2 and 3")
        if n_tensors < 0 or n_kv < 0:
            raise self._error(f"is corrupt: negative counts ({n_tensors} tensors, {n_kv} key-value pairs)")
        least = _HEADER.size + n_kv * _MIN_KV_BYTES + n_tensors * _MIN_TENSOR_BYTES
        if least > self.size:
            raise self._error(f"is truncated or corrupt: it declares {n_kv} key-value pairs and {n_tensors} "
                              f"tensors, which need at least {least} bytes, but it has {self.size}")

    def _text(self, ptr, what):
        try:
            return ffi.string(ptr).decode("utf-8")
        except UnicodeDecodeError as e:
            raise self._error(f"is corrupt: {what} is not UTF-8 ({e})") from None

    def _value(self, ctx, i, key):
        kind = lib.gguf_get_kv_type(ctx, i)
        if kind == lib.GGUF_TYPE_STRING:
            return self._text(lib.gguf_get_val_str(ctx, i), f"the value of {key!r}")
        if kind != lib.GGUF_TYPE_ARRAY:
            np_type = np.dtype(_NUMPY_OF[kind])
            value = np.frombuffer(ffi.buffer(lib.gguf_get_val_data(ctx, i), np_type.itemsize), np_type)[0]
            return bool(value) if kind == lib.GGUF_TYPE_BOOL else value
        item = lib.gguf_get_arr_type(ctx, i)
        n = int(lib.gguf_get_arr_n(ctx, i))
        if item == lib.GGUF_TYPE_STRING:
            return [self._text(lib.gguf_get_arr_str(ctx, i, j), f"item {j} of {key!r}") for j in range(n)]
        np_type = np.dtype(_NUMPY_OF[item])
        if n == 0:
            return np.empty(0, np_type)
        raw = np.frombuffer(ffi.buffer(lib.gguf_get_arr_data(ctx, i), n * np_type.itemsize), np.uint8)
        return (raw != 0) if item == lib.GGUF_TYPE_BOOL else raw.view(np_type).copy()

    def _tensor(self, ctx, i):
        name = self._text(lib.gguf_get_tensor_name(ctx, i), f"the name of tensor {i}")
        ne = tuple(int(n) for n in ffi.unpack(lib.gguf_get_tensor_ne(ctx, i), lib.GGML_MAX_DIMS))
        value = int(lib.gguf_get_tensor_type(ctx, i))
        try:
            dtype = dtypes.from_value(value)
        except KeyError:
            raise self._error(f"has tensor {name!r} of GGML type {value}, which this GGML does not know") from None
        offset = self.data_offset + int(lib.gguf_get_tensor_offset(ctx, i))
        count = math.prod(ne)                       # Python ints: GGML's own product can wrap to 0
        nbytes = count // dtype.block_size * dtype.type_size
        if count >= 2**63 or nbytes != int(lib.gguf_get_tensor_size(ctx, i)):
            raise self._error(f"is corrupt: tensor {name!r} has ne={list(ne)}, {count} elements, more than "
                              "GGML can address")
        if offset + nbytes > self.size:
            raise self._error(f"is truncated: tensor {name!r} ({dtype.name}, ne={list(ne)}) takes bytes "
                              f"{offset}..{offset + nbytes}, but the file has {self.size}")
        return TensorInfo(name, dtype, ne, offset, nbytes)

    def read_data(self, info):
        """The GGML-layout bytes of tensor `info` (a uint8 array of `info.nbytes`)."""
        out = np.empty(info.nbytes, dtype=np.uint8)
        with open(self.path, "rb") as f:
            f.seek(info.offset)
            got = f.readinto(memoryview(out))
        if got != info.nbytes:
            raise self._error(f"changed while being read: tensor {info.name!r} got {got} of {info.nbytes} bytes")
        return out


def read(path):
    """Open and validate the GGUF file at `path` (metadata only; tensor bytes on `read_data`)."""
    return GGUFFile(path)


# ---- writing -----------------------------------------------------------------------------------
def _c_text(text, what):
    if not isinstance(text, str):
        raise TypeError(f"gguf.write: {what} must be a str, got {type(text).__name__}")
    data = text.encode("utf-8")
    if b"\0" in data:
        raise ValueError(f"gguf.write: {what} {text[:40]!r} contains a NUL character, which GGUF strings "
                         "(C strings in GGML) cannot hold")
    return data


def _set(ctx, key, value):
    name = _c_text(key, "a metadata key")
    if not name:
        raise ValueError("gguf.write: metadata keys must not be empty")
    if key == "general.alignment" and not (isinstance(value, np.uint32) and value == ALIGNMENT):
        raise ValueError(f"gguf.write: general.alignment must be np.uint32({ALIGNMENT}) (GGML's writer "
                         f"aligns to {ALIGNMENT}), got {value!r}")
    if isinstance(value, str):
        lib.gguf_set_val_str(ctx, name, _c_text(value, f"the value of {key!r}"))
    elif isinstance(value, (bool, np.bool_)):
        lib.gguf_set_val_bool(ctx, name, bool(value))
    elif isinstance(value, np.generic) and value.dtype in _GGUF_OF:
        _SETTERS[_GGUF_OF[value.dtype]](ctx, name, value.item())
    elif isinstance(value, int):
        if not -2**63 <= value < 2**63:
            raise OverflowError(f"gguf.write: {key!r} = {value} does not fit in a GGUF int64")
        lib.gguf_set_val_i64(ctx, name, value)
    elif isinstance(value, float):
        lib.gguf_set_val_f64(ctx, name, value)
    elif isinstance(value, (list, tuple, np.ndarray)):
        _set_array(ctx, key, name, value)
    else:
        raise TypeError(f"gguf.write: cannot store a {type(value).__name__} as the value of {key!r}")


def _set_array(ctx, key, name, value):
    if not isinstance(value, np.ndarray) and value and all(isinstance(v, str) for v in value):
        keep = [ffi.new("char[]", _c_text(v, f"an item of {key!r}")) for v in value]
        lib.gguf_set_arr_str(ctx, name, ffi.new("const char *[]", keep), len(keep))
        return
    array = np.asarray(value)
    if not isinstance(value, np.ndarray) and array.dtype.kind == "i":
        array = array.astype(np.int64)
    elif not isinstance(value, np.ndarray) and array.dtype.kind == "f":
        array = array.astype(np.float64)
    if array.ndim != 1 or array.dtype not in _GGUF_OF:
        raise TypeError(f"gguf.write: {key!r} must be a 1-D array of a GGUF number type, or a list of str, "
                        f"int, float or bool; got dtype {array.dtype}, shape {array.shape}")
    gguf_type = _GGUF_OF[array.dtype]
    array = np.ascontiguousarray(array.astype(np.int8) if array.dtype == np.bool_ else array)
    lib.gguf_set_arr_data(ctx, name, gguf_type, ffi.from_buffer("void *", array) if array.size else ffi.NULL,
                          array.size)


def _check_tensor(name, dtype, ne, raw, seen):
    data = _c_text(name, "a tensor name")
    if len(data) >= _MAX_NAME:
        raise ValueError(f"gguf.write: tensor name {name!r} has {len(data)} bytes; GGML allows at most "
                         f"{_MAX_NAME - 1}")
    if name in seen:
        raise ValueError(f"gguf.write: duplicate tensor name {name!r}")
    seen.add(name)
    ne = [int(n) for n in ne]
    if not 1 <= len(ne) <= lib.GGML_MAX_DIMS or any(n < 0 for n in ne):
        raise ValueError(f"gguf.write: tensor {name!r} has ne={ne}; GGUF holds 1 to 4 non-negative dims")
    if ne[0] % dtype.block_size:
        raise ValueError(f"gguf.write: tensor {name!r} of type {dtype.name} has rows of {ne[0]} elements, not a "
                         f"multiple of the block size {dtype.block_size}")
    expected = dtype.row_size(ne[0]) * int(np.prod(ne[1:], dtype=np.int64))
    if raw.nbytes != expected:
        raise ValueError(f"gguf.write: tensor {name!r} ({dtype.name}, ne={ne}) needs {expected} bytes, got "
                         f"{raw.nbytes}")
    return data, ne


def write(path, metadata, tensors):
    """Write a GGUF file atomically.

    Args:
        path: the file to create or replace.
        metadata: dict key -> value (see the module docstring), written in its order.
        tensors: sequence of (name, dtype, ne, raw): GGML `ne` (innermost first, 1 to 4 values) and the
            tensor's GGML-layout bytes (a uint8 numpy array), in file order.
    """
    ctx = ffi.gc(lib.gguf_init_empty(), lib.gguf_free)
    for key, value in metadata.items():
        _set(ctx, key, value)
    seen, prepared = set(), []
    for name, dtype, ne, raw in tensors:
        dtype = dtypes.as_dtype(dtype)
        raw = np.ascontiguousarray(raw).view(np.uint8).reshape(-1)
        data, ne = _check_tensor(name, dtype, ne, raw, seen)
        prepared.append((data, dtype, ne, raw))
    holder = Context(n_tensors=len(prepared), no_alloc=True)
    for data, dtype, ne, raw in prepared:
        t = holder.new_tensor(dtype, ne)
        lib.ggml_set_name(t.ptr, data)
        lib.gguf_add_tensor(ctx, t.ptr)
    meta = bytearray(lib.gguf_get_meta_size(ctx))
    lib.gguf_get_meta_data(ctx, ffi.from_buffer(meta))
    with atomic_write(path) as f:
        f.write(meta)
        position = 0
        for i, (_, _, _, raw) in enumerate(prepared):
            if lib.gguf_get_tensor_offset(ctx, i) != position:
                raise RuntimeError("gguf.write: GGML laid out tensor offsets differently than expected")
            f.write(memoryview(raw))
            padded = -(-raw.nbytes // ALIGNMENT) * ALIGNMENT
            f.write(bytes(padded - raw.nbytes))
            position += padded
