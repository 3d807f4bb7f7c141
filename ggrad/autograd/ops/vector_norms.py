"""Vector norms: norm / linalg.vector_norm for p = 2 ('fro'), 1, inf, -inf, 0 and any other real p.

The 2-norm and the general p-norm have PyTorch's gradients, which the compositions sqrt(sum(x^2)) and
sum(|x|^p)^(1/p) would make nan where the norm or an element is 0: 0 there instead, as PyTorch.
"""

import math

from ...ggml.errors import ArgumentError
from ..autocast_hook import FLOAT32, autocast_op
from ..function import Function
from ..torch_dtypes import resolve
from . import reduce as rd
from . import unary as un
from ..declaration import declare
from ..arguments import NUMBER, NUMBER_OR_STR, kinds


class _L2Norm(Function):
    """sqrt(sum(x^2)) over dims; gradient x / norm, 0 where the norm is 0."""

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        ctx.dims = dims
        kept = un.sqrt(rd.sum(x * x, dims, keepdim=True))
        out = kept if keepdim else kept.reshape(_dropped(x.shape, dims))
        ctx.save_for_backward(x, out)   # the output: create_graph differentiates through it
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        kept = out.reshape(tuple(1 if i in ctx.dims else n for i, n in enumerate(x.shape)))
        g = g.reshape(kept.shape)
        at_zero = 1.0 - un.Step.apply(kept)
        return g * x / (kept + at_zero), None, None


class _PNorm(Function):
    """(sum |x|^p)^(1/p) over dims for a real p outside {0, 1, 2, +-inf} (negative p too, as PyTorch: a zero
    element makes the norm 0). Gradient sgn(x) |x|^(p-1) ||x||^(1-p), with PyTorch's zeros: at zero elements
    for p < 1 and wherever the norm is 0 for p > 1."""

    @staticmethod
    def forward(ctx, x, dims, keepdim, p):
        kept = rd.sum(un.abs(x) ** p, dims, keepdim=True) ** (1.0 / p)
        ctx.save_for_backward(x, kept)
        ctx.p = p
        return kept if keepdim else kept.reshape(_dropped(x.shape, dims))

    @staticmethod
    def backward(ctx, g):
        x, kept = ctx.saved_tensors
        p = ctx.p
        g = g.reshape(kept.shape)
        a = un.abs(x)
        if p < 1.0:   # |x|^(p-1) is inf at 0: those elements get 0, the scale kept^(1-p) is finite
            nonzero = un.Step.apply(a)
            scaled = un.Sgn.apply(x) * (a + (1.0 - nonzero)) ** (p - 1.0) * nonzero
            return scaled * g * kept ** (1.0 - p), None, None, None
        open_ = un.Step.apply(kept)   # 1 where the norm is > 0
        scale = g * open_ / (kept + (1.0 - open_)) ** (p - 1.0)
        return un.Sgn.apply(x) * a ** (p - 1.0) * scale, None, None, None


class _CountNonzero(Function):
    """The number of nonzero elements over dims (the 0-"norm"): its gradient is undefined, as PyTorch's
    (the input's .grad stays None)."""

    @staticmethod
    def forward(ctx, a, dims, keepdim):
        return rd.sum(un.Step.apply(a), dims, keepdim)

    @staticmethod
    def backward(ctx, g):
        return None, None, None


def _dropped(shape, dims):
    return tuple(n for i, n in enumerate(shape) if i not in dims)


@kinds(ord=NUMBER)
@declare()
def vector_norm(x, ord=2, dim=None, keepdim=False, dtype=None):  # noqa: A002 (PyTorch's name)
    """(sum |x|^ord)^(1/ord) over `dim` (all when None); ord inf/-inf are max/min |x|, 0 counts nonzeros."""
    if not x.dtype.is_float:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point tensor as input, got {x.dtype.name}")
    dims = rd.normalize_dims(dim, x.ndim)
    if dtype is not None:
        x = x.to(resolve(dtype))
    if ord == 2:
        if not x.ndim:
            return un.abs(x)
        return _L2Norm.apply(x, dims, keepdim)
    a = un.abs(x)
    if ord == math.inf:
        return rd.amax(a, dims if x.ndim else None, keepdim)
    if ord == -math.inf:
        return rd.amin(a, dims if x.ndim else None, keepdim)
    if ord == 0:
        return _CountNonzero.apply(a, dims, keepdim)
    if ord == 1:
        return rd.sum(a, dims, keepdim)
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise TypeError(f"linalg.vector_norm: ord must be a real number or +-inf, got {ord!r}")
    return _PNorm.apply(x, dims, keepdim, float(ord))


@kinds(p=NUMBER_OR_STR)
@declare(method=True)
@autocast_op("norm", FLOAT32)
def norm(x, p="fro", dim=None, keepdim=False, dtype=None):
    """PyTorch's torch.norm for vector norms ('fro' is the 2-norm over `dim`); 'nuc' is not supported."""
    rd.check_flag(keepdim, "keepdim", "norm")
    if p == "fro":
        p = 2
    if isinstance(p, str):
        raise ArgumentError(f"norm: p={p!r} is not supported (vector norms and 'fro' only)")
    return vector_norm(x, p, dim, keepdim, dtype)
