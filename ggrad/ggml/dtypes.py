"""GGML tensor types with their numpy equivalents and sizes.

Every `GGML_TYPE_*` the installed GGML declares becomes a `DType`; the common ones have short names
(f32, f16, bf16, i32, i16, i8, f64, i64) and the quantized ones keep GGML's (q4_0, q8_0, ...).
"""

import numpy as np

from ._lib import ffi, lib
from .errors import DTypeError

_NUMPY = {
    "f32": np.float32, "f16": np.float16, "f64": np.float64,
    "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "bf16": np.uint16,  # stored as raw 16-bit words; converted to float32 on read
}


class DType:
    """One GGML tensor type.

    Attributes:
        name: short name (`"f32"`, `"q4_0"`).
        value: the `enum ggml_type` value.
        numpy: the numpy dtype holding one element, or None for quantized types.
        block_size: elements per block (1 unless quantized).
        type_size: bytes per block.
    """

    __slots__ = ("name", "value", "numpy", "block_size", "type_size")
    is_complex = False   # torch.dtype's read; ggrad emulates complex64 above GGML (autograd/complex_tensor.py)

    def __init__(self, name, value):
        self.name = name
        self.value = value
        self.numpy = np.dtype(_NUMPY[name]) if name in _NUMPY else None
        self.block_size = int(lib.ggml_blck_size(value))
        self.type_size = int(lib.ggml_type_size(value))

    @property
    def is_quantized(self):
        return bool(lib.ggml_is_quantized(self.value))

    @property
    def is_float(self):
        return self.name in ("f32", "f16", "bf16", "f64")

    @property
    def itemsize(self):
        """Bytes per element (fractional for quantized types)."""
        return self.type_size / self.block_size

    def row_size(self, n):
        """Bytes taken by a row of `n` elements."""
        if n % self.block_size:
            raise DTypeError(f"{self.name}: a row of {n} elements is not a multiple of the block size {self.block_size}")
        return n // self.block_size * self.type_size

    @property
    def torch_name(self):
        """PyTorch's name of the type where it has one ("float32"), else GGML's ("q4_0")."""
        return _TORCH_NAMES.get(self.name, self.name)

    def __repr__(self):
        return f"ggrad.{self.torch_name}"   # as torch.float32

    def __reduce__(self):
        return (from_name, (self.name,))


def _collect():
    by_value = {}
    for attr in dir(lib):
        if not attr.startswith("GGML_TYPE_") or attr == "GGML_TYPE_COUNT":
            continue
        value = getattr(lib, attr)
        if not ffi.string(lib.ggml_type_name(value)) or lib.ggml_blck_size(value) == 0:
            continue  # removed types keep their enum slot but have no traits
        name = attr[len("GGML_TYPE_"):].lower()
        by_value[value] = DType(name, value)
    return by_value


_BY_VALUE = _collect()
_BY_NAME = {d.name: d for d in _BY_VALUE.values()}
_TORCH_NAMES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64", "i32": "int32",
                "i16": "int16", "i8": "int8"}
_ALIASES = {"float32": "f32", "float": "f32", "float16": "f16", "half": "f16", "bfloat16": "bf16",
            "int32": "i32", "int": "i32", "int16": "i16", "int8": "i8", "float64": "f64", "int64": "i64"}

f32 = _BY_NAME["f32"]
f16 = _BY_NAME["f16"]
bf16 = _BY_NAME["bf16"]
i32 = _BY_NAME["i32"]
i16 = _BY_NAME["i16"]
i8 = _BY_NAME["i8"]


def all_dtypes():
    """Every type the installed GGML knows, in enum order."""
    return [_BY_VALUE[v] for v in sorted(_BY_VALUE)]


def from_name(name):
    """The DType called `name` (`"f32"`, `"float16"`, `"q4_0"`, GGML's `"q4_K"` or `"q4_k"`, ...)."""
    key = _ALIASES.get(name, name)
    if key not in _BY_NAME and isinstance(key, str):
        key = key.lower()
    if key not in _BY_NAME:
        raise DTypeError(f"unknown dtype {name!r}; known: {', '.join(sorted(_BY_NAME))}")
    return _BY_NAME[key]


def is_name(name):
    """Whether `name` names a dtype ("f16", "float16", "q4_0", ...)."""
    return isinstance(name, str) and (name in _BY_NAME or name in _ALIASES or name.lower() in _BY_NAME)


def from_value(value):
    """The DType of an `enum ggml_type` value."""
    return _BY_VALUE[int(value)]


def from_numpy(np_dtype):
    """The DType storing a numpy dtype (float64 -> f32 and int64 -> i32 are the caller's choice, not made here)."""
    np_dtype = np.dtype(np_dtype)
    for name, np_type in _NUMPY.items():
        if name != "bf16" and np.dtype(np_type) == np_dtype:
            return _BY_NAME[name]
    raise DTypeError(f"no GGML type stores numpy dtype {np_dtype}")


def as_dtype(x):
    """Accept a DType, a name, GGML's enum value or a numpy dtype."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        return from_name(x)
    if isinstance(x, int) and not isinstance(x, bool):
        if x not in _BY_VALUE:
            raise DTypeError(f"no GGML type has the value {x}")
        return _BY_VALUE[x]
    try:
        return from_numpy(x)
    except TypeError:
        raise DTypeError(f"not a dtype: {x!r}") from None
