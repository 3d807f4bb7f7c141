"""Dtype rules: how an op treats the dtypes of its inputs, in one place.

GGML computes most math in float32 only. A rule is `rule(fn, args) -> result`: it checks the inputs,
converts them for the compute, applies the op (`apply_function`) and converts the result back.
`promote` is the rule for two operands of an arithmetic op.
"""

import numbers

from ..ggml import f32, i32
from ..ggml.errors import DTypeError
from .factory import full
from .function import apply_function
from .tensor import Tensor


def _first(args):
    for a in args:
        if isinstance(a, Tensor):
            return a
    raise TypeError("expected at least one Tensor argument")


def _in_f32(fn, args, accepts, int_result=None):
    """Apply `fn` in float32: f32 inputs as they are, others (when `accepts` their dtype) converted, the
    result cast back to the input's dtype (or to `int_result` for integer inputs, when given)."""
    dtype = _first(args).dtype
    if dtype is f32:
        return apply_function(fn, args)
    if not accepts(dtype):
        raise DTypeError(f"{fn.__name__.lower()}: expected a floating point tensor, got {dtype.name}; "
                         "use .float() first")
    converted = tuple(a.to(f32) if isinstance(a, Tensor) and a.dtype is not f32 else a for a in args)
    out = apply_function(fn, converted)
    result = dtype if dtype.is_float or int_result is None else int_result
    return out if result is f32 else out.to(result)


def FLOAT(fn, args):
    """Floating point inputs; float16/bfloat16 are computed in float32 and the result cast back."""
    return _in_f32(fn, args, lambda dt: dt.is_float)


def NUMERIC(fn, args):
    """Float or int32 inputs, computed in float32 (int32 exact below 2**24), cast back to the input's dtype."""
    return _in_f32(fn, args, lambda dt: dt.is_float or dt is i32)


def TRUE_DIVIDE(fn, args):
    """As NUMERIC, except that integer inputs give a float32 result (PyTorch's true division)."""
    return _in_f32(fn, args, lambda dt: dt.is_float or dt is i32, int_result=f32)


def require_float(x, op):
    """DTypeError unless x is a floating point Tensor."""
    if not x.dtype.is_float:
        raise DTypeError(f"{op}: expected a floating point tensor, got {x.dtype.name}; use .float() first")
    return x


def as_float32(x, op, allow_int=False):
    """x in float32 for an op that computes in it (int32 too with `allow_int`); DTypeError otherwise."""
    if x.dtype is f32:
        return x
    if not (x.dtype.is_float or (allow_int and x.dtype is i32)):
        raise DTypeError(f"{op}: expected a floating point tensor, got {x.dtype.name}; use .float() first")
    return x.to(f32)


def scalar_dtype(number, other):
    """A Python number takes the other operand's dtype, unless it is a float meeting an int tensor."""
    if other.dtype.is_float:
        return other.dtype
    return i32 if isinstance(number, numbers.Integral) else f32


def promote(a, b, op):
    """Both operands as Tensors of one dtype: numbers become constants, mixed floats meet in float32,
    an int tensor meeting a float one becomes float."""
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError(f"{op}: at least one operand must be a Tensor")
    for v in (a, b):   # None or a str would become a NaN constant: refuse them, as PyTorch
        if not isinstance(v, (Tensor, numbers.Number)) and not (hasattr(v, "dtype") and getattr(v, "ndim", 1) == 0):
            raise TypeError(f"{op}: expected a Tensor or a number as operand, got {type(v).__name__} {v!r:.40}")
    if not isinstance(a, Tensor):
        a = full((), a, dtype=scalar_dtype(a, b), device=b.device)
    if not isinstance(b, Tensor):
        b = full((), b, dtype=scalar_dtype(b, a), device=a.device)
    if a.dtype is not b.dtype:
        if a.dtype.is_float and b.dtype.is_float:
            a, b = a.to(f32), b.to(f32)
        elif a.dtype.is_float:
            b = b.to(a.dtype)
        elif b.dtype.is_float:
            a = a.to(b.dtype)
    return a, b
