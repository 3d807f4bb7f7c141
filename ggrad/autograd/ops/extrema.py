"""Elementwise maximum, minimum, fmax and fmin, with PyTorch's values and gradients at ties and nan.

Values are picked (`where`), never computed as b + relu(a - b) (which rounds, and turns inf - inf into
nan). maximum/minimum propagate nan; fmax/fmin ignore it (nan only where both are nan).
Gradients, as PyTorch's derivatives:
- maximum(a, b): to a where a > b, to b where b > a, half to each on a tie, all to both where either
  is nan (so maximum(x, x) at a nan passes 2g); minimum mirrored.
- fmax(a, b): to a where a >= b or b is nan (ties to a), else to b; fmin with a <= b.
"""

from ..dtype_rules import promote
from ..function import Function
from ..tensor import Tensor
from . import logical as lg
from .selection import where
from .broadcast import broadcast_shapes, reduce_to
from . import reduce as rd
from .convert import relabel
from .indexing import gather
from .math import isnan, nan_carrier
from ...ggml import f32
from ..declaration import declare
from ..arguments import INT_OR_TENSOR, kinds


def _f(mask):
    """A bool tensor as float32 0/1."""
    return relabel(mask, f32)


def _pair(a, b, op):
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"{op}(): expected both arguments to be Tensors, got {type(a).__name__} and "
                        f"{type(b).__name__}")
    broadcast_shapes(a.shape, b.shape, op)   # as `op`'s, not as the comparison's it is computed from
    return promote(a, b, op)


class _Extremum(Function):
    """One of the four ops, `kind` in "maximum", "minimum", "fmax", "fmin"; see the module docstring."""

    @staticmethod
    def forward(ctx, a, b, kind):
        ctx.kind = kind
        ctx.save_for_backward(a, b)
        larger = kind in ("maximum", "fmax")
        take_b = lg.gt(b, a) if larger else lg.lt(b, a)
        if kind in ("fmax", "fmin"):
            take_b = lg.logical_or(take_b, isnan(a))   # a nan: b (nan too only if both are)
        out = where(take_b, b, a)
        if kind in ("maximum", "minimum") and out.dtype.is_float:
            out = out + nan_carrier(b)   # a nan in a is picked already
        return out

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        kind = ctx.kind
        if kind in ("maximum", "minimum"):
            tie = _f(lg.eq(a, b)) * 0.5
            a_loses = _f(lg.lt(a, b) if kind == "maximum" else lg.gt(a, b))
            b_loses = _f(lg.gt(a, b) if kind == "maximum" else lg.lt(a, b))
            to_a, to_b = 1.0 - a_loses - tie, 1.0 - b_loses - tie
        else:
            wins = lg.ge(a, b) if kind == "fmax" else lg.le(a, b)
            to_a = _f(lg.logical_or(wins, isnan(b)))
            to_b = 1.0 - to_a
        ga = reduce_to(g * to_a, a.shape) if ctx.needs_input_grad[0] else None
        gb = reduce_to(g * to_b, b.shape) if ctx.needs_input_grad[1] else None
        return ga, gb, None


@declare(method=True)
def maximum(a, other):
    """Elementwise maximum; nan where either is nan."""
    a, b = _pair(a, other, "maximum")
    return _Extremum.apply(a, b, "maximum")


@declare(method=True)
def minimum(a, other):
    """Elementwise minimum; nan where either is nan."""
    a, b = _pair(a, other, "minimum")
    return _Extremum.apply(a, b, "minimum")


@declare(method=True)
def fmax(a, other):
    """Elementwise maximum ignoring nan: the other value where one is nan."""
    a, b = _pair(a, other, "fmax")
    return _Extremum.apply(a, b, "fmax")


@declare(method=True)
def fmin(a, other):
    """Elementwise minimum ignoring nan: the other value where one is nan."""
    a, b = _pair(a, other, "fmin")
    return _Extremum.apply(a, b, "fmin")


@kinds(dim=INT_OR_TENSOR)
@declare()
def max(x, dim=None, keepdim=False):  # noqa: A001 (PyTorch's name)
    """`max(x)` is the largest element; `max(x, dim)` returns (values, indices); `max(x, y)` is elementwise."""
    if isinstance(dim, Tensor):
        return maximum(x, dim)
    rd.check_flag(keepdim, "keepdim", "max")
    if dim is None:
        return rd.amax(x)
    return _picked(x, dim, keepdim, rd.argmax(x, dim, keepdim))


@kinds(dim=INT_OR_TENSOR)
@declare()
def min(x, dim=None, keepdim=False):  # noqa: A001 (PyTorch's name)
    if isinstance(dim, Tensor):
        return minimum(x, dim)
    rd.check_flag(keepdim, "keepdim", "min")
    if dim is None:
        return rd.amin(x)
    return _picked(x, dim, keepdim, rd.argmin(x, dim, keepdim))


def _picked(x, dim, keepdim, index):
    """(values, indices) of max/min along dim: the values gathered at the indices, so that the gradient
    goes to the one entry picked (PyTorch's; amax/amin share it among ties)."""
    if x.ndim == 0:
        return rd.values_indices(x * 1, index)
    d = rd.normalize_dims(dim, x.ndim)[0]
    kept = index if keepdim else index.unsqueeze(d)
    values = gather(x, d, kept)
    return rd.values_indices(values if keepdim else values.squeeze(d), index)
