"""Vector norms: norm / linalg.vector_norm for p = 2 ('fro'), 1, inf, -inf, 0 and any other p > 0.

The 2-norm is one node with PyTorch's gradient x / ||x||, and 0 where the norm is 0 (the composition
sqrt(sum(x^2)) would give nan there).
"""

import math

from ..autocast_hook import autocast_op
from ..function import Function
from . import reduce as rd
from . import unary as un


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


def _dropped(shape, dims):
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def vector_norm(x, ord=2, dim=None, keepdim=False, dtype=None):  # noqa: A002 (PyTorch's name)
    """(sum |x|^ord)^(1/ord) over `dim` (all when None); ord inf/-inf are max/min |x|, 0 counts nonzeros."""
    if not x.dtype.is_float:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point tensor as input, got {x.dtype.name}")
    dims = rd.normalize_dims(dim, x.ndim)
    if dtype is not None:
        x = x.to(dtype)
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
        return rd.sum(un.Step.apply(a), dims, keepdim)   # gradient 0
    if ord == 1:
        return rd.sum(a, dims, keepdim)
    if ord < 0 or not isinstance(ord, (int, float)):
        raise ValueError(f"vector_norm: ord must be a number >= 0 or +-inf, got {ord!r}")
    return rd.sum(a ** float(ord), dims, keepdim) ** (1.0 / ord)


@autocast_op("norm")
def norm(x, p="fro", dim=None, keepdim=False, dtype=None):
    """PyTorch's torch.norm for vector norms ('fro' is the 2-norm over `dim`); 'nuc' is not supported."""
    if p == "fro":
        p = 2
    if isinstance(p, str):
        raise ValueError(f"norm: p={p!r} is not supported (vector norms and 'fro' only)")
    return vector_norm(x, p, dim, keepdim, dtype)
