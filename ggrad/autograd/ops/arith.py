"""Arithmetic with PyTorch's extra arguments: div with rounding_mode, floor_divide, remainder, fmod,
clamp with tensor bounds (and PyTorch's answer when min > max: max everywhere), and pow with a tensor
exponent at PyTorch's edges (0 ** 0 = 1, a negative base to an integer power is real, to a fractional
one nan).

Difference from PyTorch: clamp with tensor bounds gives +-3.4e38 (float32's largest) for an infinite x
clamped by an infinite bound on the same side (PyTorch: +-inf).

Integer operands are computed in float32 (exact below 2**24) and keep their dtype where PyTorch's does;
an integer division or remainder by zero raises PyTorch's RuntimeError("ZeroDivisionError") (at once for
host data, else when the step computes).
"""

import numpy as np

from ...ggml import f32
from ...ggml.errors import ArgumentError, UnsupportedDTypeError
from ..autocast_hook import FLOAT32, autocast_op
from ..dtype_rules import promote, result_type
from ..function import Function
from ..factory import tensor
from ..tensor import Tensor
from . import binary as bi
from .selection import where
from . import math as mt
from . import reduce as rd
from . import unary as un
from . import extrema as ex
from . import logical as lg
from .convert import relabel
from .broadcast import broadcast_shapes, expand_to, reduce_to
from .indexing import known_values
from .indexing import check_values
from ..declaration import declare
from ..arguments import OPERAND, kinds


class _Rounded(Function):
    """round(a / b) by `rounding` (trunc or floor); gradient 0 to both, as PyTorch."""

    @staticmethod
    def forward(ctx, a, b, rounding):
        return rounding(a / b)

    @staticmethod
    def backward(ctx, g):
        return g * 0.0, g * 0.0, None


@declare(method=True, inplace=True, aliases=("divide",))
def div(a, b, rounding_mode=None):
    """a / b; rounding_mode "trunc" rounds towards zero, "floor" down (integers stay integers)."""
    if rounding_mode is None:
        return bi.div(a, b)
    if rounding_mode not in ("trunc", "floor"):
        raise ArgumentError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                         f"{rounding_mode!r}")
    a, b = promote(a, b, "div")
    dtype = a.dtype
    a, b = (a, b) if dtype is f32 else (a.to(f32), _nonzero_divisor(b, dtype).to(f32))
    shape = broadcast_shapes(a.shape, b.shape, "div")
    a, b = expand_to(a, shape), expand_to(b, shape)   # the zero gradients then have the operands' shapes
    rounding = un_trunc if rounding_mode == "trunc" else un_floor
    out = _Rounded.apply(a, b, rounding)
    return out if dtype is f32 else out.to(dtype)


def un_trunc(x):
    return mt.Trunc.apply(x)


def un_floor(x):
    return mt.Floor.apply(x)


def _operands(a, b, op):
    """promote(a, b, op), with shapes that do not broadcast reported as `op`'s, in the caller's order (the
    ops a composition is made of would name themselves)."""
    a, b = promote(a, b, op)
    broadcast_shapes(a.shape, b.shape, op)
    return a, b


@declare(method=True)
def floor_divide(a, b):
    return div(*_operands(a, b, "floor_divide"), rounding_mode="floor")


@declare(method=True, inplace=True)
def remainder(a, b):
    """a - floor(a / b) * b: the sign of b, as Python's %."""
    return _modulo(a, b, un_floor, "remainder")


@declare(method=True, inplace=True)
def fmod(a, b):
    """a - trunc(a / b) * b: the sign of a, as C's fmod."""
    return _modulo(a, b, un_trunc, "fmod")


def _modulo(a, b, rounding, op):
    a, b = _operands(a, b, op)
    dtype = a.dtype
    a, b = (a, b) if dtype is f32 else (a.to(f32), _nonzero_divisor(b, dtype).to(f32))
    out = a - rounding(a / b).detach() * b
    return out if dtype is f32 else out.to(dtype)


def _nonzero_divisor(b, dtype):
    """`b` when dividing integers of `dtype` by it: PyTorch's RuntimeError for a zero in it (floats divide
    into inf and nan instead)."""
    if dtype.is_float:
        return b
    host = known_values(b)
    if host is not None:   # host data: numpy looks, no compute
        if (host == 0).any():
            raise RuntimeError("ZeroDivisionError")
    else:
        check_values(b, lambda t: rd.SumAll.apply(1.0 - un.Step.apply(un.abs(t.to(f32)))), "ZeroDivisionError")
    return b


class ClampTensor(Function):
    """min(max(x, lo), hi) with tensor bounds (nan from any side stays nan); gradients as PyTorch's
    clamp_backward_min_max: x where lo <= x <= hi, lo where x < lo < hi, hi where x > hi or hi < lo
    (with one bound: x where inside it, the bound where x is beyond it)."""

    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x, lo, hi)
        out = x if lo is None else ex.maximum(x, lo)
        return out if hi is None else ex.minimum(out, hi)

    @staticmethod
    def backward(ctx, g):
        x, lo, hi = ctx.saved_tensors
        need = ctx.needs_input_grad
        if lo is not None and hi is not None:
            gx = lg.logical_and(lg.ge(x, lo), lg.le(x, hi))
            glo = lg.logical_and(lg.lt(x, lo), lg.lt(lo, hi)) if need[1] else None
            ghi = lg.logical_or(lg.gt(x, hi), lg.lt(hi, lo)) if need[2] else None
        else:
            gx = lg.ge(x, lo) if hi is None else lg.le(x, hi)
            glo = lg.lt(x, lo) if lo is not None and need[1] else None
            ghi = lg.gt(x, hi) if hi is not None and need[2] else None
        return tuple(None if m is None else reduce_to(g * relabel(m, f32), t.shape)
                     for m, t in ((gx, x), (glo, lo), (ghi, hi)))


def _finite(t):
    """t with +-inf as the largest finite float32 (so that the 0/1 selections below stay exact)."""
    return un.Clamp.apply(t, -un._F32_MAX, un._F32_MAX)


@declare(method=True, inplace=True, aliases=("clip",))
def clamp(x, min=None, max=None):  # noqa: A002 (PyTorch's names)
    """min(max(x, min), max), bounds numbers or tensors; min > max gives max, as PyTorch."""
    if not isinstance(x, Tensor):
        raise TypeError(f"clamp(): argument 'input' must be a Tensor, not {type(x).__name__}")
    if min is None and max is None:
        raise ArgumentError("clamp: at least one of 'min' or 'max' must not be None")
    if not x.dtype.is_float:   # clamp(int, 2.5) is float
        dtype = result_type(*(v for v in (x, min, max) if v is not None))
        if dtype.is_float:
            x = x.to(dtype)
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        bounds = [b if b is None or isinstance(b, Tensor) else tensor(float(b), device=x.device)
                  for b in (min, max)]
        shape = x.shape
        for b in bounds:
            if b is not None:
                shape = broadcast_shapes(shape, b.shape, "clamp")
        src = expand_to(x if x.dtype.is_float else x.to(f32), shape)
        lo, hi = (None if b is None else expand_to(b.to(src.dtype), shape) for b in bounds)
        out = ClampTensor.apply(src, lo, hi)
        return out if out.dtype is x.dtype or x.dtype.is_float else out.to(x.dtype)
    if min is not None and max is not None and float(min) > float(max):
        return _Constant.apply(x, float(max))
    return un.clamp(x, min, max)


class _Constant(Function):
    """Every element `value` (clamp with min > max); gradient 0."""

    @staticmethod
    def forward(ctx, x, value):
        return un.Clamp.apply(x, value, value)

    @staticmethod
    def backward(ctx, g):
        return g * 0.0, None


@kinds(x=OPERAND)
@declare(method=True, inplace=True)
@autocast_op("pow", FLOAT32)
def pow(x, p):  # noqa: A001 (PyTorch's name)
    """x ** p; with a tensor exponent, exp(p log|x|) with the sign of an integer power of a negative x."""
    if not isinstance(p, Tensor):
        return bi.pow(x, p)
    x, p = promote(x, p, "pow")   # 2 ** int_tensor and int ** int_tensor stay integers, as PyTorch
    shape = broadcast_shapes(x.shape, p.shape, "pow")
    if not x.dtype.is_float:
        return _integer_pow(expand_to(x, shape), expand_to(p, shape))
    return _TensorPow.apply(expand_to(x, shape), expand_to(p, shape))


def _integer_pow(x, p):
    """x ** p for integer tensors by squaring (exact while values fit float32's 24 bits; exp(p log x)
    is not). A negative exponent gives PyTorch's integer answer: 1 ** -n = 1, (-1) ** -n = +-1, else 0."""
    exponents = known_values(p)
    bits = int(np.abs(exponents).max()).bit_length() if exponents is not None and exponents.size else 31
    base, exponent = x.to(f32), p.to(f32)
    rest, out = un.abs(exponent), bi.mul(base, 0.0) + 1.0
    for _ in range(bits):
        odd = lg.eq(remainder(rest, 2.0), 1.0)
        out = where(odd, out * base, out)
        base, rest = base * base, un_floor(rest / 2.0)
    unit = lg.eq(un.abs(x.to(f32)), 1.0)
    out = where(lg.lt(exponent, 0.0), where(unit, out, 0.0), out)
    return out.to(x.dtype)


def _pow_value(x, p):
    finite_p = _finite(p)   # nan -> the largest float (its nan comes back below), so that 1 ** nan = 1
    magnitude = un.Exp.apply(_finite(un.Log.apply(un.abs(x))) * finite_p)   # log 0 kept finite: 0 ** 0 = 1
    negative = un.Step.apply(-x)
    whole = 1.0 - un.Step.apply(un.abs(finite_p - mt.RoundAway.apply(finite_p)))
    bounded = un.Clamp.apply(p, -2.0 ** 24, 2.0 ** 24)
    odd = whole * (bounded - mt.Floor.apply(bounded * 0.5) * 2.0)
    nan_x = mt.isnan(x) * un.Step.apply(un.abs(p))            # nan ** p is nan, but nan ** 0 is 1
    nan_p = mt.isnan(p) * un.Step.apply(un.abs(x - 1.0))       # x ** nan is nan, but 1 ** nan is 1
    # nan where any, else 0: a constant (detached: sqrt's gradient at 0 would make create_graph's second
    # derivative nan)
    nan_there = (un.Sqrt.apply(-(negative * (1.0 - whole) + nan_x + nan_p)) * 0.0).detach()
    return magnitude * (1.0 - negative * odd * 2.0) + nan_there


class _TensorPow(Function):
    """x ** p for tensors of one shape; gradients as PyTorch: p x^(p-1) (0 where p == 0) and
    x^p log x (0 where x == 0 and p >= 0)."""

    @staticmethod
    def forward(ctx, x, p):
        out = _pow_value(x, p)
        ctx.save_for_backward(x, p, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, p, out = ctx.saved_tensors
        gx = gp = None
        if ctx.needs_input_grad[0]:
            zero_p = 1.0 - un.Step.apply(un.abs(p))
            safe_p = p + zero_p
            gx = g * safe_p * _pow_value(x, safe_p - 1.0) * (1.0 - zero_p)
        if ctx.needs_input_grad[1]:
            zero_x = (1.0 - un.Step.apply(un.abs(x))) * (1.0 - un.Step.apply(-p))   # x == 0 and p >= 0
            gp = g * out * un.Log.apply(x + zero_x)
        return gx, gp


# ---- shifts --------------------------------------------------------------------------------------
def _shift_operands(a, b, op):
    for t in (a, b):
        if (isinstance(t, Tensor) and t.dtype.is_float) or isinstance(t, float):
            raise UnsupportedDTypeError(f"{op}: only integer and bool tensors are supported, got a floating point "
                                        "operand")
    return _operands(a, b, op)


@declare(method=True)
def bitwise_left_shift(a, b):
    """a << b on integers: a * 2**b (exact while the result fits float32's 24 bits, as ggrad's integer
    arithmetic)."""
    a, b = _shift_operands(a, b, "bitwise_left_shift")
    return bi.mul(a, pow(2, b))


@declare(method=True)
def bitwise_right_shift(a, b):
    """a >> b on integers: floor(a / 2**b), the arithmetic shift of PyTorch's signed integers."""
    a, b = _shift_operands(a, b, "bitwise_right_shift")
    return floor_divide(a, pow(2, b))
