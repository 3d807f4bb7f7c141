"""PyTorch's `bool` and `int64`, which GGML 0.20.2 has no arithmetic for, each held in a GGML type.

`bool` is a float32 tensor of 0s and 1s (comparisons, masks and `where` compute in float32 anyway) and
`int64` an int32 tensor (GGML's index type), so a mask or an index costs no conversion. A Tensor reports
the PyTorch dtype and `numpy()` gives np.bool_ / np.int64; host data outside int32 is refused.

Integer arithmetic, comparisons and bitwise ops compute in float32, so they are exact for values in
[-2**24, 2**24] (PyTorch: the whole int64 range); beyond it results round (documented, not checked: the
values are often computed on the device).
"""

import numpy as np

from .. import ggml
from ..ggml.dtypes import DType
from ..ggml.errors import GGRADError


class IntegerOverflowError(GGRADError, OverflowError, RuntimeError):
    """An integer that does not fit the 32 bits that hold ggrad's int32 and int64 (PyTorch: RuntimeError)."""


class StoredDType(DType):
    """A PyTorch dtype held in the GGML type `storage`; `host` is the numpy dtype it reads as."""

    __slots__ = ("storage", "host", "torch_name")

    def __init__(self, name, torch_name, storage, host):
        self.name, self.torch_name = name, torch_name
        self.value, self.numpy = storage.value, storage.numpy   # what GGML and the upload code see
        self.block_size, self.type_size = storage.block_size, storage.type_size
        self.storage, self.host = storage, np.dtype(host)

    def __repr__(self):
        return f"ggrad.{self.torch_name}"

    def __reduce__(self):
        return (resolve, (self.name,))


BOOL = StoredDType("bool", "bool", ggml.f32, np.bool_)
INT64 = StoredDType("i64", "int64", ggml.i32, np.int64)
_BY_NAME = {"bool": BOOL, "i64": INT64, "int64": INT64, "long": INT64}


def is_name(name):
    """Whether `name` is a dtype name this module adds ("bool", "int64", "long", "i64")."""
    return isinstance(name, str) and name in _BY_NAME
_INT32_RANGE = (-2**31, 2**31 - 1)


def resolve(dtype):
    """A dtype of ggrad's from a DType, a name ("int64", "bool", "f16"), or a numpy dtype."""
    if isinstance(dtype, StoredDType):
        return dtype
    if isinstance(dtype, str) and dtype in _BY_NAME:
        return _BY_NAME[dtype]
    if dtype is bool or (not isinstance(dtype, (str, DType)) and _is_numpy(dtype, np.bool_)):
        return BOOL
    if not isinstance(dtype, (str, DType)) and _is_numpy(dtype, np.int64):
        return INT64
    dt = ggml.as_dtype(dtype)
    return INT64 if dt.name == "i64" else dt   # GGML's own i64 has no ops: ggrad's int64 stands in


def _is_numpy(dtype, np_type):
    try:
        return np.dtype(dtype) == np.dtype(np_type)
    except TypeError:
        return False


def is_integer(dtype):
    return dtype is INT64 or dtype is ggml.i32


def category(dtype):
    """0 for bool, 1 for integers, 2 for floating point (PyTorch's promotion categories)."""
    if dtype is BOOL:
        return 0
    return 2 if dtype.is_float else 1


def to_storage(array, dtype):
    """Host `array` in the numpy dtype that holds `dtype` (IntegerOverflowError when an int does not fit)."""
    if dtype is BOOL:
        return array.astype(bool).astype(np.float32)
    if is_integer(dtype):
        if array.dtype.kind in "iub" and array.size:
            lo, hi = int(array.min()), int(array.max())
            if lo < _INT32_RANGE[0] or hi > _INT32_RANGE[1]:
                raise IntegerOverflowError(
                    f"value {hi if hi > _INT32_RANGE[1] else lo} cannot be converted to type {dtype!r} "
                    f"without overflow: ggrad holds integers in 32 bits (GGML has no 64-bit integer ops)")
        return array.astype(np.int32, copy=False)
    return None


def from_storage(array, dtype):
    """A numpy array read from GGML, in the numpy dtype PyTorch gives `dtype`."""
    if dtype is BOOL:
        return array != 0
    if dtype is INT64:
        return array.astype(np.int64)
    return array
