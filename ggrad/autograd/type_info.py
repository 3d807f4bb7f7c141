"""`ggrad.finfo` and `ggrad.iinfo`: the numeric limits of a dtype, as PyTorch's torch.finfo / torch.iinfo report
them (code masks attention with `finfo(dtype).min` and clamps with `iinfo(dtype).max`).

The limits are the PyTorch dtype's, not its storage's: int64 reports 64 bits although ggrad holds int64 in
32 (a tensor created with a value beyond int32 raises IntegerOverflowError, saying so).
"""

import numpy as np

from ..ggml import f32
from .torch_dtypes import BOOL, host_of, resolve

_BFLOAT16 = {"bits": 16, "eps": 0.0078125, "max": 3.3895313892515355e38, "tiny": 1.1754943508222875e-38,
             "resolution": 0.01}   # numpy has no bfloat16


def _dtype_name(dtype):
    return str(dtype).split(".")[-1]


class finfo:
    """Limits of a floating point dtype: bits, eps, max, min, tiny (= smallest_normal), resolution."""

    def __init__(self, dtype=None):
        dtype = f32 if dtype is None else resolve(dtype)
        if not dtype.is_float:
            raise TypeError(f"finfo() requires a floating point input type, got {_dtype_name(dtype)}")
        if dtype.name == "bf16":
            info = _BFLOAT16
        else:
            np_info = np.finfo(dtype.numpy)
            info = {"bits": np_info.bits, "eps": float(np_info.eps), "max": float(np_info.max),
                    "tiny": float(np_info.tiny), "resolution": 10.0 ** -np_info.precision}
        self.bits, self.eps, self.max = info["bits"], info["eps"], info["max"]
        self.min, self.tiny, self.resolution = -info["max"], info["tiny"], info["resolution"]
        self.smallest_normal = self.tiny
        self.dtype = dtype.torch_name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.tiny:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype: bits, min, max."""

    def __init__(self, dtype):
        dtype = resolve(dtype)
        if dtype.is_float or dtype is BOOL:
            raise TypeError(f"iinfo() requires an integer input type, got {_dtype_name(dtype)}")
        np_info = np.iinfo(host_of(dtype))
        self.bits, self.min, self.max = np_info.bits, int(np_info.min), int(np_info.max)
        self.dtype = np.dtype(host_of(dtype)).name

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
