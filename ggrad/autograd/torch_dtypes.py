"""PyTorch's `bool`, `int64`, `int8`, `uint8` and `int16`, which GGML 0.20.2 has no arithmetic for, each
held in a GGML type.

`bool` is a float32 tensor of 0s and 1s (comparisons, masks and `where` compute in float32 anyway) and
`int64` an int32 tensor (GGML's index type), so a mask or an index costs no conversion. A Tensor reports
the PyTorch dtype and `numpy()` gives np.bool_ / np.int64; host data outside int32 is refused.

`int8`, `uint8` and `int16` are int32 tensors too: GGML's I8 and I16 have no conversion to or from
float32 (only byte copies), and every integer op computes in float32 anyway. A result converted to one
of them wraps modulo 2**8 or 2**16 as PyTorch's (`uint8(250) + 10 == 4`, `int8(127) + 1 == -128`).

Integer arithmetic, comparisons and bitwise ops compute in float32, so they are exact for values in
[-2**24, 2**24] (PyTorch: the whole int64 range); beyond it results round (documented, not checked: the
values are often computed on the device).
"""

import numpy as np

from .. import ggml
from ..ggml.dtypes import DType
from ..ggml.errors import DTypeError, GGRADError


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

    def __reduce__(self):
        return (resolve, (self.name,))


BOOL = StoredDType("bool", "bool", ggml.f32, np.bool_)
INT64 = StoredDType("i64", "int64", ggml.i32, np.int64)
INT8 = StoredDType("i8", "int8", ggml.i32, np.int8)
UINT8 = StoredDType("u8", "uint8", ggml.i32, np.uint8)
INT16 = StoredDType("i16", "int16", ggml.i32, np.int16)
SMALL_INTS = (INT8, UINT8, INT16)   # the dtypes whose values wrap when a result leaves their range
_BY_NAME = {"bool": BOOL, "i64": INT64, "int64": INT64, "long": INT64, "i8": INT8, "int8": INT8, "u8": UINT8,
            "uint8": UINT8, "i16": INT16, "int16": INT16, "short": INT16}
_BY_HOST = {np.dtype(d.host): d for d in (INT64,) + SMALL_INTS}


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
    if not isinstance(dtype, (str, DType)):
        for host, dt in _BY_HOST.items():
            if _is_numpy(dtype, host):
                return dt
    dt = ggml.as_dtype(dtype)
    # GGML's own i64, i16 and i8 have no ops: ggrad's int64, int16 and int8 stand in
    return _BY_NAME.get(dt.name, dt) if dt.name in ("i64", "i16", "i8") else dt


def _is_numpy(dtype, np_type):
    try:
        return np.dtype(dtype) == np.dtype(np_type)
    except TypeError:
        return False


def refuse_float64(dtype, op):
    """DTypeError for float64, which ggrad names (so `dtype=torch.float64` code reads) but cannot
    compute: GGML has no float64 arithmetic, and holding it as float32 would misreport its precision."""
    if dtype.name == "f64":
        raise DTypeError(f"{op}: float64 is not supported: GGML computes no float64 (no f64 arithmetic or "
                         "conversion); use float32 (float64 numpy data becomes float32 in ggrad.tensor)")
    return dtype


def is_integer(dtype):
    return dtype is INT64 or dtype is ggml.i32 or dtype in SMALL_INTS


def host_of(dtype):
    """The numpy dtype PyTorch's `dtype` reads as (float32 for bfloat16, which numpy lacks)."""
    host = getattr(dtype, "host", None)
    if host is not None:
        return host
    return np.dtype(np.float32) if dtype.name == "bf16" else dtype.numpy


def from_host(np_dtype):
    """ggrad's integer dtype read as numpy's `np_dtype` (int32 for np.int32)."""
    np_dtype = np.dtype(np_dtype)
    return ggml.i32 if np_dtype == np.int32 else _BY_HOST[np_dtype]


def integer_range(dtype):
    """(lowest, highest) value of an integer dtype as PyTorch holds it."""
    info = np.iinfo(host_of(dtype))
    return int(info.min), int(info.max)


def category(dtype):
    """0 for bool, 1 for integers, 2 for floating point (PyTorch's promotion categories)."""
    if dtype is BOOL:
        return 0
    return 2 if dtype.is_float else 1


def wrap_number(value, dtype):
    """A Python int meeting a tensor of int8, uint8 or int16 in an op, wrapped into its range as PyTorch
    casts it (`uint8 + 300` adds 44); other values and dtypes as they are."""
    if dtype not in SMALL_INTS or not isinstance(value, int) or isinstance(value, bool):
        return value
    low, high = integer_range(dtype)
    return low + (value - low) % (high - low + 1)


def to_storage(array, dtype):
    """Host `array` in the numpy dtype that holds `dtype` (IntegerOverflowError when an int does not fit)."""
    if dtype is BOOL:
        return array.astype(bool).astype(np.float32)
    if is_integer(dtype):
        if array.dtype.kind in "iub" and array.size:
            lo, hi = int(array.min()), int(array.max())
            low, high = _INT32_RANGE if dtype is INT64 or dtype is ggml.i32 else integer_range(dtype)
            if lo < low or hi > high:
                why = (": ggrad holds integers in 32 bits (GGML has no 64-bit integer ops)"
                       if dtype is INT64 else "")
                raise IntegerOverflowError(
                    f"value {hi if hi > high else lo} cannot be converted to type {dtype!r} without overflow{why}")
        return array.astype(np.int32, copy=False)
    return None


def from_storage(array, dtype):
    """A numpy array read from GGML, in the numpy dtype PyTorch gives `dtype`."""
    if dtype is BOOL:
        return array != 0
    if dtype is INT64 or dtype in SMALL_INTS:
        return array.astype(dtype.host)
    return array
