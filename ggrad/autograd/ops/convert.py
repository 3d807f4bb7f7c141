"""Conversion between dtypes, PyTorch's `.to(dtype)`: a GGML cast where the storage changes, a relabel
(no node) where it does not (int64 <-> int32, bool -> float32), `!= 0` into bool. Into int8, uint8 and
int16 a value outside their range wraps modulo 2**bits (floats truncated first), as PyTorch's."""

from ... import ggml
from .. import device_locks, grad_mode, view_tracking
from ..tensor import Tensor
from ..torch_dtypes import BOOL, SMALL_INTS, integer_range, is_integer, refuse_float64, resolve
from . import quant, unary as un


def relabel(t, dtype):
    """A Tensor over the same node as `t` reporting `dtype` (whose storage is `t`'s), with no history."""
    with device_locks.lock_of(t.device):
        out = Tensor._make(t._node, t.shape, dtype, t.device, t._pending, t._block)
    out._version = t._version
    return out


def _storage(dtype):
    return getattr(dtype, "storage", dtype)


def convert(x, dtype):
    """x as `dtype`: floats to integers truncate towards zero, anything to bool is `x != 0`."""
    dtype = refuse_float64(resolve(dtype), "to()")
    if x.dtype is dtype:
        return x
    if x._view_of is not None and view_tracking.blocks_across(x):   # w.T of quantized w: dequantized w, viewed
        x = quant.dequantize(x)
    if dtype is BOOL:
        return x != 0   # logical.ne, through Tensor's operator (logical builds on this module)
    if x.dtype is BOOL:
        x = relabel(x, ggml.f32)
    if dtype in SMALL_INTS and not _fits(x.dtype, dtype):
        x = _wrapped(x, dtype)
    target = _storage(dtype)
    if target.name not in ("f32", "f16", "bf16", "i32"):
        raise ggml.DTypeError(f"to(): conversion to {dtype!r} is not supported (float32, float16, bfloat16, "
                              "int32, int64, bool)")
    source = _storage(x.dtype)
    if source is not target:
        x = relabel(x, source) if x.dtype is not source else x
        if source is not ggml.f32 and target is not ggml.f32:
            x = un.cast(x, ggml.f32)   # GGML casts int32 only to and from float32
        x = un.cast(x, target)
    return x if x.dtype is dtype else relabel(x, dtype)


def _fits(source, dtype):
    """Whether every value of integer dtype `source` lies in `dtype`'s range (no wrap needed)."""
    if not is_integer(source):
        return False
    lo, hi = integer_range(source)
    low, high = integer_range(dtype)
    return low <= lo and hi <= high


def _wrapped(x, dtype):
    """x (truncated towards zero when float) wrapped into `dtype`'s range, in float32: exact for
    |x| < 2**24, as ggrad's integer arithmetic."""
    low, high = integer_range(dtype)
    span = float(high - low + 1)
    with grad_mode.no_grad():
        v = convert(x, ggml.f32)
        if x.dtype.is_float:
            v = un.Trunc.apply(v)
        return v - un.Floor.apply((v - float(low)) * (1.0 / span)) * span
