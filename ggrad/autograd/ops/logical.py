"""Comparisons and logic giving bool tensors (no gradient), as PyTorch's.

Both sides meet in float32 (integers exact below 2**24) and the 0/1 result is relabelled bool (ggrad's
bool is stored as float32: no conversion). `a > b` is step(a - b): a nan gives 0, as it should; equality
is "neither greater" and neither side nan, so that inf == inf and nan != nan.
"""

import builtins
import numbers

import numpy as np

from ... import ggml
from .. import grad_mode
from ...ggml.errors import UnsupportedDTypeError
from ..dtype_rules import result_type
from ..factory import tensor
from ..tensor import Tensor
from ..torch_dtypes import BOOL, INT64
from . import binary as bi
from . import reduce as rd
from . import unary as un
from .broadcast import broadcast_shapes
from .convert import convert, relabel
from ..declaration import declare
from ..arguments import TENSOR, kinds


def _float(x, like):
    """x (a Tensor or a number) as a float32 Tensor on `like`'s device, gradient cut."""
    if not isinstance(x, Tensor):
        if not isinstance(x, (numbers.Number, np.number, np.bool_)):
            raise TypeError(f"comparison with an object of type {type(x).__name__}")
        return tensor(float(x), dtype=ggml.f32, device=like.device)
    x = x.detach()
    return x if x.dtype is ggml.f32 else convert(x, ggml.f32)


def _operands(a, b):
    like = a if isinstance(a, Tensor) else b
    return _float(a, like), _float(b, like)


def _broadcastable(a, b, op):
    """ShapeError naming `op` and the shapes in the caller's order where they do not broadcast (the
    comparisons are computed from differences, some with the operands swapped: their errors would name
    `sub` and the shapes reversed)."""
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        broadcast_shapes(a.shape, b.shape, op)


def _isnan(x):
    """1 where x is nan: GGML's clamp sends nan to its upper bound, so x - x, |x| and -|x| all reach it."""
    return un.Clamp.apply(x - x, 0.0, 1.0) * un.Clamp.apply(x, 0.0, 1.0) * un.Clamp.apply(-x, 0.0, 1.0)


def _bool(values):
    return relabel(values, BOOL)


def _has_float(a, b):
    return builtins.any(isinstance(t, Tensor) and t.dtype.is_float or isinstance(t, float) for t in (a, b))


def _equal01(a, b, floats):
    fa, fb = _operands(a, b)
    out = 1.0 - un.Step.apply(fa - fb) - un.Step.apply(fb - fa)
    if floats:   # unordered: nan on either side
        out = out * (1.0 - _isnan(fa)) * (1.0 - _isnan(fb))
    return out


@declare(method=True, aliases=("greater",))
def gt(a, b):
    _broadcastable(a, b, "gt")
    with grad_mode.no_grad():
        fa, fb = _operands(a, b)
        return _bool(un.Step.apply(fa - fb))


@declare(method=True, aliases=("less",))
def lt(a, b):
    _broadcastable(a, b, "lt")
    return gt(b, a)


@declare(method=True)
def eq(a, b):
    _broadcastable(a, b, "eq")
    with grad_mode.no_grad():
        return _bool(_equal01(a, b, _has_float(a, b)))


@declare(method=True, aliases=("not_equal",))
def ne(a, b):
    _broadcastable(a, b, "ne")
    with grad_mode.no_grad():
        return _bool(1.0 - _equal01(a, b, _has_float(a, b)))


@declare(method=True, aliases=("greater_equal",))
def ge(a, b):
    _broadcastable(a, b, "ge")
    with grad_mode.no_grad():
        fa, fb = _operands(a, b)
        return _bool(un.Step.apply(fa - fb) + _equal01(fa, fb, _has_float(a, b)))


@declare(method=True, aliases=("less_equal",))
def le(a, b):
    _broadcastable(a, b, "le")
    return ge(b, a)




# ---- logic ---------------------------------------------------------------------------------------
def _truth(x):
    """x != 0 as float32 0/1."""
    if isinstance(x, Tensor) and x.dtype is BOOL:
        return relabel(x.detach(), ggml.f32)
    return relabel(ne(x, 0), ggml.f32)


@declare(method=True)
def logical_not(x):
    with grad_mode.no_grad():
        return _bool(1.0 - _truth(x))


@kinds(b=TENSOR)
@declare(method=True)
def logical_and(a, b):
    with grad_mode.no_grad():
        return _bool(_truth(a) * _truth(b))


@kinds(b=TENSOR)
@declare(method=True)
def logical_or(a, b):
    with grad_mode.no_grad():
        ta, tb = _truth(a), _truth(b)
        return _bool(ta + tb - ta * tb)


@kinds(b=TENSOR)
@declare(method=True)
def logical_xor(a, b):
    with grad_mode.no_grad():
        return _bool(un.abs(_truth(a) - _truth(b)))


def _bitwise(op, logical, a, b):
    for t in (a, b):
        if isinstance(t, Tensor) and t.dtype.is_float or isinstance(t, float):
            raise UnsupportedDTypeError(f"{op}: only integer and bool tensors are supported, "
                                        "got a floating point operand")
    if builtins.all(not isinstance(t, Tensor) or t.dtype is BOOL for t in (a, b)) and \
            builtins.all(isinstance(t, Tensor) or isinstance(t, bool) for t in (a, b)):
        return logical(a, b)
    return _integer_bitwise(op, a, b)


_BITS = 25   # two's complement bits of the integers float32 holds exactly: [-2**24, 2**24)


def _integer_bitwise(op, a, b):
    """a op b on integers, bit by bit in float32: each operand split into 25 bits (floor(x / 2**k) mod 2,
    which is two's complement for negatives too), the bits combined, the sum weighted back."""
    dtype = _result_int(a, b)
    with grad_mode.no_grad():
        fa, fb = _operands(a, b)
        shape = bi.broadcast_shapes(fa.shape, fb.shape, op)
        n = max(1, int(np.prod(shape)))
        powers = tensor((2.0 ** -np.arange(_BITS)).reshape(_BITS, 1).astype(np.float32), device=fa.device)
        weights = 2.0 ** np.arange(_BITS)
        weights[-1] = -weights[-1]
        weights = tensor(weights.reshape(_BITS, 1).astype(np.float32), device=fa.device)

        def bits(x):
            y = un.Floor.apply(bi.expand_to(x, shape).reshape(1, n) * powers)
            return y - un.Floor.apply(y * 0.5) * 2.0

        ba, bb = bits(fa), bits(fb)
        if op == "bitwise_and":
            c = ba * bb
        elif op == "bitwise_or":
            c = ba + bb - ba * bb
        else:
            c = un.abs(ba - bb)
        out = rd.sum(c * weights, 0).reshape(shape)
        return convert(out, dtype)


def _result_int(a, b):
    return result_type(a, b)


@declare(method=True)
def bitwise_and(a, b):
    return _bitwise("bitwise_and", logical_and, a, b)


@declare(method=True)
def bitwise_or(a, b):
    return _bitwise("bitwise_or", logical_or, a, b)


@declare(method=True)
def bitwise_xor(a, b):
    return _bitwise("bitwise_xor", logical_xor, a, b)


@declare(method=True)
def bitwise_not(x):
    if x.dtype.is_float:
        raise UnsupportedDTypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    if x.dtype is BOOL:
        return logical_not(x)
    with grad_mode.no_grad():
        return -x - 1


# ---- reductions to bool --------------------------------------------------------------------------
@declare(method=True)
def any(x, dim=None, keepdim=False):  # noqa: A001 (PyTorch's name)
    """Whether any element (along `dim`) is nonzero, as bool."""
    with grad_mode.no_grad():
        return _bool(rd._amax(_truth(x), dim, keepdim)[0]) if x.numel() else _bool(rd.sum(_truth(x), dim, keepdim))


@declare(method=True)
def all(x, dim=None, keepdim=False):  # noqa: A001 (PyTorch's name)
    """Whether every element (along `dim`) is nonzero, as bool."""
    with grad_mode.no_grad():
        return logical_not(any(logical_not(x), dim, keepdim))


@declare(method=True)
def count_nonzero(x, dim=None):
    """How many elements (along `dim`) are nonzero, as int64."""
    with grad_mode.no_grad():
        return convert(rd.sum(_truth(x), dim), INT64)


@declare(method=True)
def nonzero(x, *, as_tuple=False):
    """Indices of the nonzero elements (a host read, as PyTorch's sync): (n, ndim) int64, or one per dim."""
    found = np.argwhere(x.numpy() if x.ndim else x.numpy().reshape(1))
    if as_tuple:
        return tuple(tensor(found[:, d], dtype=INT64, device=x.device) for d in range(found.shape[1]))
    return tensor(found, dtype=INT64, device=x.device)


@declare(method=True)
def argwhere(x):
    return nonzero(x)


# ---- whole-tensor tests --------------------------------------------------------------------------
@declare(method=True)
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol |b| elementwise (equal infinities close; nan close to nan with equal_nan)."""
    with grad_mode.no_grad():
        fa, fb = _operands(a, b)
        diff = un.abs(fa - fb)
        within = 1.0 - un.Step.apply(diff - (un.abs(fb) * float(rtol) + float(atol)))
        not_finite = un.Clamp.apply(diff - diff, 0.0, 1.0)   # 1 where diff is inf or nan (clamp sends nan up)
        within = within * (1.0 - not_finite)          # equal infinities are caught by the equality below
        equal = _equal01(fa, fb, True)
        close = within + equal - within * equal
        if equal_nan:
            both = _isnan(fa) * _isnan(fb)
            close = close + both - close * both
        return _bool(close)


@declare(method=True)
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(all(isclose(a, b, rtol, atol, equal_nan)).item())


@declare(method=True)
def equal(a, b):
    """True if a and b have the same shape and elements (PyTorch's torch.equal)."""
    if tuple(a.shape) != tuple(b.shape):
        return False
    return bool(all(eq(a, b)).item())

