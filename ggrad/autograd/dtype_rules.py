"""Dtype rules: how an op treats the dtypes of its inputs, in one place.

GGML computes most math in float32 only. A rule is `rule(fn, args) -> result`: it checks the inputs,
converts them for the compute, applies the op (`apply_function`) and converts the result back.
`promote` is the rule for two operands of an arithmetic op, by PyTorch's `result_type`.
"""

import numbers
import weakref

import numpy as np

from ..ggml import f32
from .torch_dtypes import BOOL, INT64, category, from_host, host_of, is_integer, wrap_number
from ..ggml.errors import UnsupportedDTypeError
from .factory import full
from . import grad_mode
from .function import apply_function
from .roundings import cast_back, kept_half_unpack, rounded, widen
from .tensor import Tensor


def _first(args):
    for a in args:
        if isinstance(a, Tensor):
            return a
    raise TypeError("expected at least one Tensor argument")


def _in_f32(fn, args, accepts, int_result=None):
    """Apply `fn` in float32: f32 inputs as they are, others (when `accepts` their dtype) converted, the
    result cast back to the input's dtype (or to `int_result` for integer inputs, when given)."""
    first = args[0]
    dtype = (first if isinstance(first, Tensor) else _first(args)).dtype
    if dtype is f32:
        return apply_function(fn, args)
    if not accepts(dtype):
        raise UnsupportedDTypeError(f"{fn.__name__.lower()}: expected a floating point tensor, got {dtype.name}; "
                         "use .float() first")
    kept = _kept_half(fn, args)
    converted = tuple(a if not isinstance(a, Tensor) or a.dtype is f32 else rounded(a, f32) if i in kept
                      else widen(a, f32) for i, a in enumerate(args))
    out = apply_function(fn, converted)
    if kept:
        _keep_half(out, {id(converted[i]): args[i] for i in kept})
    result = dtype if dtype.is_float or int_result is None else int_result
    return out if result is f32 else cast_back(out, result)


def _kept_half(fn, args):
    """The positions of the half precision float arguments that `fn`'s backward reads (a Primitive's
    `saved_positions`), where a backward is recorded: backward keeps them in their own dtype, as PyTorch
    (half the bytes of their float32 conversions), and converts them again when it runs. Such an argument is
    converted as itself, not as the float32 value it was rounded from (roundings.rounded, not widen): the
    forward reads the rounded value, as PyTorch, and the float32 source is free once it is rounded."""
    positions = getattr(fn, "saved_positions", None)
    if positions is None or fn.saves is None or not grad_mode.is_grad_enabled():
        return ()
    if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        return ()
    return tuple(i for i in positions(args) if isinstance(args[i], Tensor) and args[i].dtype.is_float
                 and args[i].dtype is not f32)


def _keep_half(out, halves):
    """Have the backward of `out`'s op keep the half tensors `halves` (by id of their float32 conversions)
    in place of those conversions, converted again to float32 when backward reads them: its saved tensors
    packed as saved_tensors_hooks would pack them (FunctionCtx._pack)."""
    node = out[0].grad_fn if isinstance(out, tuple) else out.grad_fn
    ctx = node.ctx if node is not None else None
    if ctx is None or ctx._hooked is not None:   # no backward recorded; or saved_tensors_hooks took them
        return
    ctx._pack((lambda t: halves.get(id(t), t), kept_half_unpack))
    # modified in place before backward, a kept half tensor makes saved_tensors raise, as PyTorch's would
    ctx._versions += tuple((weakref.ref(t), t._version) for t in halves.values())


def FLOAT(fn, args):
    """Floating point inputs; float16/bfloat16 are computed in float32 and the result cast back."""
    return _in_f32(fn, args, lambda dt: dt.is_float)


def _numeric(dt):
    return dt.is_float or is_integer(dt) or dt is BOOL


def NUMERIC(fn, args):
    """Float or int32 inputs, computed in float32 (int32 exact below 2**24), cast back to the input's dtype."""
    return _in_f32(fn, args, _numeric)


def INT_TO_FLOAT(fn, args):
    """Float inputs as FLOAT; integer and bool inputs computed in float32 with a float32 result (PyTorch's
    exp, sqrt, sin, erf, ... of an integer tensor)."""
    return _in_f32(fn, args, _numeric, int_result=f32)


def TRUE_DIVIDE(fn, args):
    """As NUMERIC, except that integer inputs give a float32 result (PyTorch's true division)."""
    return _in_f32(fn, args, _numeric, int_result=f32)


def require_float(x, op):
    """UnsupportedDTypeError (a DTypeError) unless x is a floating point Tensor."""
    if not x.dtype.is_float:
        raise UnsupportedDTypeError(f"{op}: expected a floating point tensor, got {x.dtype.name}; use .float() first")
    return x


def as_float32(x, op, allow_int=False):
    """x in float32 for an op that computes in it (int32 too with `allow_int`); UnsupportedDTypeError otherwise."""
    if x.dtype is f32:
        return x
    if not (x.dtype.is_float or (allow_int and _numeric(x.dtype))):
        raise UnsupportedDTypeError(f"{op}: expected a floating point tensor, got {x.dtype.name}; use .float() first")
    return x.to(f32)


def promote_types(a, b):
    """The dtype two tensor dtypes meet in: the higher category; float16 with bfloat16 is float32;
    integers as numpy promotes them, as PyTorch's table (uint8 with int8 is int16, int32 with int64 int64)."""
    if a is b:
        return a
    ca, cb = category(a), category(b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 2:
        return f32
    return from_host(np.promote_types(host_of(a), host_of(b)))


def _as_number(x):
    """numpy scalars and 0-d arrays as the Python numbers they hold (PyTorch takes them as numbers)."""
    if isinstance(x, np.generic) or (isinstance(x, np.ndarray) and x.ndim == 0):
        return x.item()
    return x


def result_type(*operands):
    """PyTorch's torch.result_type: the highest category (bool < int < float) among all operands; its
    dtype from the tensors with dimensions if one has that category, else from 0-d tensors, else from
    the Python numbers (weak: int is int64, float float32)."""
    groups = ([], [], [])
    for x in map(_as_number, operands):
        if isinstance(x, Tensor):
            groups[0 if x.ndim else 1].append(x.dtype)
        elif isinstance(x, bool):
            groups[2].append(BOOL)
        elif isinstance(x, numbers.Integral):
            groups[2].append(INT64)
        elif isinstance(x, numbers.Real):
            groups[2].append(f32)
        else:
            raise TypeError(f"result_type: unsupported operand of type {type(x).__name__}")
    top = max(category(d) for group in groups for d in group)
    for group in groups:
        found = [d for d in group if category(d) == top]
        if found:
            out = found[0]
            for d in found[1:]:
                out = promote_types(out, d)
            return out
    raise TypeError("result_type: no operands")


def promote(a, b, op):
    """Both operands as Tensors of their result_type (numbers become constants of it)."""
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a.dtype is b.dtype:
        return a, b   # the common case: nothing to promote
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError(f"{op}: at least one operand must be a Tensor")
    a, b = _as_number(a), _as_number(b)
    for v in (a, b):   # None or a str would become a NaN constant: refuse them, as PyTorch
        if not isinstance(v, (Tensor, numbers.Number)):
            raise TypeError(f"{op}: expected a Tensor or a number as operand, got {type(v).__name__} {v!r:.40}")
    dtype = result_type(a, b)
    device = a.device if isinstance(a, Tensor) else b.device
    a, b = (widen(x, dtype) if isinstance(x, Tensor) else full((), wrap_number(x, dtype), dtype=dtype, device=device)
            for x in (a, b))
    return a, b
