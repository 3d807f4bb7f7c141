"""`ggrad.save(obj, "x.gguf")` / `ggrad.load("x.gguf")`: checkpoints as GGUF, GGML's own file format.

What a file written here holds, so that other GGUF readers see an ordinary file:
  - every Tensor and numpy array of `obj` is a GGUF tensor, stored bit for bit in its GGML type (f32, f16,
    bf16, i32, quantized, ...), named by its path in `obj` ("fc1.weight", "optimizer.state.0.exp_avg")
    when that is unique and shorter than 64 bytes, else "ggrad.tensor.N". numpy arrays of a type GGML
    lacks (uint32, bool, complex, 0-d or more than 4-D) are stored as their bytes (i8);
  - every number, string and bool is a typed metadata value "ggrad.value.<path>" (int: i64, float: f64),
    a list or tuple of only ints, only floats, only strs or only bools is one GGUF array, and an int
    beyond int64 (numpy's PCG64 RNG state) is its decimal string;
  - "ggrad.structure" (JSON) records the nesting (dicts with their key types, lists, tuples, None) and,
    per tensor, its shape, dtype, requires_grad, kind (Parameter) and the CRC-32 of its bytes (checked on
    load, so a damaged tensor is an error, not silently wrong weights), naming tensors and values.
Loading rebuilds `obj` exactly. A GGUF file written by others (no "ggrad.structure") loads as a dict
{tensor name: Tensor} in file order; `metadata=True` also returns the file's metadata as Python values.
"""

import json
import math
import zlib

import numpy as np

from . import ggml
from .autograd import Parameter, Tensor
from .autograd.raw import from_raw, to_raw
from .autograd.torch_dtypes import resolve
from .ggml import gguf
from .ggml.errors import FormatError

FORMAT = "ggrad.save"
VERSION = 1
_STRUCTURE = "ggrad.structure"
_VALUE = "ggrad.value."
_GGML_OF_NUMPY = {"float32": "f32", "float16": "f16", "float64": "f64", "int8": "i8", "int16": "i16",
                  "int32": "i32", "int64": "i64"}


# ---- saving ------------------------------------------------------------------------------------
def _scalar_kind(v):
    """The GGUF scalar kind of a Python value stored as metadata, or None."""
    if type(v) is bool:
        return "bool"
    if type(v) is int and -2**63 <= v < 2**63:
        return "int"
    if type(v) is float:
        return "float"
    if type(v) is str and "\0" not in v:
        return "str"
    return None


class _Writer:
    """Turns an object tree into a JSON structure, GGUF metadata values and GGUF tensors."""

    def __init__(self):
        self.metadata = {}
        self.tensors = []
        self.names = set()

    def _key(self, path):
        base = _VALUE + ".".join(path).replace("\0", "?")
        key, n = base, 1
        while key in self.metadata:
            key, n = f"{base}#{n}", n + 1
        return key

    def _tensor_name(self, path):
        name = ".".join(path) or "tensor"
        if "\0" in name or len(name.encode()) >= 64 or name in self.names:
            name = f"ggrad.tensor.{len(self.tensors)}"
        self.names.add(name)
        return name

    def _add_tensor(self, path, dtype, shape, raw, node):
        name = self._tensor_name(path)
        node["crc32"] = zlib.crc32(raw)
        # GGML's writer keeps ne[i] only up to the last dim > 1, so a zero-size dim there would be lost
        ne = [0] if 0 in shape else list(reversed(shape)) or [1]
        self.tensors.append((name, dtype, ne, raw))
        return name

    def _value(self, path, value):
        key = self._key(path)
        self.metadata[key] = value
        return key

    def encode(self, obj, path):
        where = "obj" + "".join(f"[{p!r}]" for p in path)
        kind = _scalar_kind(obj)
        if kind is not None:
            return {"kv": self._value(path, obj)}
        if obj is None:
            return None
        if type(obj) is str:
            return {"str": obj}                                   # holds a NUL: JSON can, GGUF cannot
        if type(obj) is int:
            return {"kv": self._value(path, str(obj)), "int": True}
        if isinstance(obj, Tensor):
            return self._encode_tensor(obj, path)
        if isinstance(obj, (np.ndarray, np.generic)):
            return self._encode_array(obj, path, where)
        if isinstance(obj, dict):
            items = []
            for key, value in obj.items():
                if not (key is None or type(key) in (str, int, float, bool)):
                    raise TypeError(f"ggrad.save: dict keys must be str, int, float, bool or None; got "
                                    f"{type(key).__name__} at {where}")
                items.append([key, self.encode(value, path + [str(key)])])
            return {"dict": items}
        if isinstance(obj, (list, tuple)):
            return self._encode_sequence(obj, path)
        raise TypeError(f"ggrad.save: cannot save an object of type {type(obj).__name__} at {where} (only Tensors, "
                        "numpy arrays, numbers, strings, None and dicts/lists/tuples of them)")

    def _encode_sequence(self, seq, path):
        form = "list" if isinstance(seq, list) else "tuple"
        kinds = {_scalar_kind(v) for v in seq}
        if seq and len(kinds) == 1 and None not in kinds:
            return {"kv": self._value(path, list(seq)), form: True}
        return {form: [self.encode(v, path + [str(i)]) for i, v in enumerate(seq)]}

    def _encode_tensor(self, t, path):
        node = {"tensor": None, "dtype": t.dtype.name, "shape": list(t.shape)}
        node["tensor"] = self._add_tensor(path, t.dtype, t.shape, to_raw(t), node)
        if t.requires_grad:
            node["requires_grad"] = True
        if isinstance(t, Parameter):
            node["kind"] = "parameter"
        return node

    def _encode_array(self, obj, path, where):
        array = np.asarray(obj)
        if array.dtype.kind not in "biufc":
            raise TypeError(f"ggrad.save: cannot save a numpy array of dtype {array.dtype} at {where} "
                            "(only numeric and bool arrays)")
        form = "npscalar" if isinstance(obj, np.generic) else "ndarray"
        node = {form: None, "npdtype": array.dtype.str, "shape": list(array.shape)}
        array = np.ascontiguousarray(array)
        if array.dtype.name in _GGML_OF_NUMPY and array.dtype.isnative and 1 <= array.ndim <= 4:
            dtype = _GGML_OF_NUMPY[array.dtype.name]
            node[form] = self._add_tensor(path, dtype, array.shape, array.reshape(-1).view(np.uint8), node)
        else:
            node[form] = self._add_tensor(path, "i8", (array.nbytes,), array.reshape(-1).view(np.uint8), node)
            node["bytes"] = True
        return node


def save(obj, path):
    """Write `obj` (see the module docstring) to the GGUF file `path`, atomically."""
    writer = _Writer()
    root = writer.encode(obj, [])
    header = {"ggrad.format": FORMAT, "ggrad.version": np.uint32(VERSION),
              _STRUCTURE: json.dumps(root, allow_nan=True)}
    gguf.write(path, {**header, **writer.metadata}, writer.tensors)


# ---- loading -----------------------------------------------------------------------------------
def _python(value):
    """A metadata value as plain Python (numpy scalars and arrays become int/float/bool and lists)."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    return value


class _Reader:
    def __init__(self, file, device, dequantize):
        self.file, self.device, self.dequantize = file, device, dequantize

    def corrupt(self, what):
        return FormatError(f"ggrad.load: {self.file.path} is corrupt ({what})")

    def tensor_bytes(self, node, name, dtype, shape):
        info = self.file.by_name.get(name) if isinstance(name, str) else None
        if info is None:
            raise self.corrupt(f"the structure names tensor {name!r}, which the file lacks")
        expected = ggml.as_dtype(dtype)
        count = math.prod(shape)
        if info.dtype is not expected or count != math.prod(info.ne):
            raise self.corrupt(f"tensor {name!r} is {info.dtype.name} ne={list(info.ne)} in the file but "
                               f"{expected.name} {tuple(shape)} in the structure")
        raw = self.file.read_data(info)
        if zlib.crc32(raw) != node.get("crc32"):
            raise self.corrupt(f"tensor {name!r} does not match its CRC-32 checksum")
        return raw

    def value(self, node):
        key = node["kv"]
        if key not in self.file.metadata:
            raise self.corrupt(f"the structure names metadata key {key!r}, which the file lacks")
        value = _python(self.file.metadata[key])
        if node.get("int"):
            return int(value)
        return tuple(value) if node.get("tuple") else value

    def decode(self, node):
        if node is None:
            return None
        if not isinstance(node, dict):
            raise self.corrupt(f"unexpected structure node {node!r:.80}")
        if "kv" in node:
            return self.value(node)
        if "str" in node:
            return node["str"]
        if "tensor" in node:
            return self.decode_tensor(node)
        if "ndarray" in node or "npscalar" in node:
            return self.decode_array(node)
        if "dict" in node:
            return {key: self.decode(value) for key, value in node["dict"]}
        if "list" in node:
            return [self.decode(v) for v in node["list"]]
        if "tuple" in node:
            return tuple(self.decode(v) for v in node["tuple"])
        raise self.corrupt(f"unknown structure node with keys {sorted(node)}")

    def decode_tensor(self, node):
        shape = tuple(node["shape"])
        dtype = resolve(node["dtype"])
        stored = getattr(dtype, "storage", dtype)   # ggrad's bool and int64 are held as f32 and i32
        raw = self.tensor_bytes(node, node["tensor"], stored.name, shape)
        if node.get("requires_grad") and not dtype.is_float:
            raise self.corrupt(f"tensor {node['tensor']!r} of type {dtype.name} is marked as requiring grad")
        if self.dequantize and dtype.is_quantized:
            t = from_raw(ggml.decode(raw, dtype, shape), ggml.f32, shape, self.device)
        else:
            t = from_raw(raw, dtype, shape, self.device)
        requires_grad = bool(node.get("requires_grad"))
        if node.get("kind") == "parameter":
            return Parameter(t, requires_grad=requires_grad)
        return t.requires_grad_(True) if requires_grad else t

    def decode_array(self, node):
        form = "npscalar" if "npscalar" in node else "ndarray"
        npdtype, shape = np.dtype(node["npdtype"]), tuple(node["shape"])
        if node.get("bytes"):
            raw = self.tensor_bytes(node, node[form], "i8", (math.prod(shape) * npdtype.itemsize,))
        else:
            raw = self.tensor_bytes(node, node[form], _GGML_OF_NUMPY[npdtype.name], shape)
        array = raw.view(npdtype).reshape(shape).copy()
        return array[()] if form == "npscalar" else array

    def foreign(self):
        tensors = {}
        for info in self.file.tensors:
            raw = self.file.read_data(info)
            if self.dequantize and info.dtype.is_quantized:
                raw, dtype = ggml.decode(raw, info.dtype, info.shape), ggml.f32
            else:
                dtype = info.dtype
            tensors[info.name] = from_raw(raw, dtype, info.shape, self.device)
        return tensors


def load(path, map_location=None, dequantize=False, metadata=False):
    """Read a GGUF file: what `save` wrote, or {tensor name: Tensor} for a file written by others.

    Args:
        path: the file.
        map_location: the device tensors are created on (default CPU).
        dequantize: give quantized tensors back as float32 (default: kept in their GGML type).
        metadata: also return the file's metadata (a dict of Python values): `(obj, metadata)`.
    """
    file = gguf.read(path)
    reader = _Reader(file, map_location, dequantize)
    if file.metadata.get("ggrad.format") != FORMAT:
        obj = reader.foreign()
    else:
        version = file.metadata.get("ggrad.version")
        if not isinstance(version, np.uint32) or version > VERSION:
            raise FormatError(f"ggrad.load: {file.path} has ggrad format version {version!r}; this ggrad reads "
                              f"versions up to {VERSION}")
        try:
            obj = reader.decode(json.loads(file.metadata.get(_STRUCTURE, "")))
        except (KeyError, TypeError, ValueError, RecursionError) as e:
            if isinstance(e, FormatError):
                raise
            raise reader.corrupt(f"{type(e).__name__}: {e}") from e
    if metadata:
        return obj, {key: _python(value) for key, value in file.metadata.items()}
    return obj
