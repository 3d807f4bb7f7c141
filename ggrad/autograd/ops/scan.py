"""Cumulative sums and products along a dimension.

cumsum is GGML's cumsum over rows (the dimension moved last); its gradient is the reversed cumulative
sum of the gradient. cumprod is a Hillis-Steele scan of products (log2(n) steps of multiply-by-shifted),
so its gradient, composed from the same ops, is exact with zeros in the input, where the usual
division by x is not.

Differences from PyTorch: integer inputs give int32 (PyTorch: int64).
"""

import numpy as np

from ...ggml import ops
from ..dtype_rules import as_float32
from ..factory import tensor
from ..primitive import Primitive
from ..tensor import _axis
from .shape_ops import flip
from .views import PadTo, Slice, contiguous


class CumsumRows(Primitive):
    """Cumulative sums along the last dimension (GGML cumsum)."""

    @staticmethod
    def build(ctx, graph, x):
        return ops.cumsum(graph.ctx, x)

    @staticmethod
    def backward(ctx, g):
        return flip(CumsumRows.apply(flip(g, -1)), -1)


def _along_last(x, d, fn):
    """fn applied with dimension d moved last, and moved back."""
    if d == x.ndim - 1:
        return fn(x)
    return fn(contiguous(x.transpose(d, -1))).transpose(d, -1)


def _result_dtype(x, dtype):
    if dtype is not None:
        return dtype
    return x.dtype


def cumsum(x, dim, dtype=None):
    """y[..., i] = x[..., 0] + ... + x[..., i] along `dim`."""
    src = as_float32(x, "cumsum", allow_int=True)
    if x.ndim == 0:
        out = src * 1.0
    else:
        out = _along_last(src, _axis(dim, x.ndim), CumsumRows.apply)
    want = _result_dtype(x, dtype)
    return out if out.dtype is want else out.to(want)


def _shifted_ones(y, d, k):
    """y shifted by k along d, with ones coming in at the start."""
    n = y.shape[d]
    stops = list(y.shape)
    stops[d] = n - k
    starts = [0] * y.ndim
    starts[d] = k
    moved = PadTo.apply(Slice.apply(y, (0,) * y.ndim, tuple(stops)), tuple(starts), y.shape)
    ones = np.zeros([1 if i != d else n for i in range(y.ndim)], dtype=np.float32)
    ones[(slice(None),) * d + (slice(0, k),)] = 1.0
    return moved + tensor(ones, device=y.device)


def cumprod(x, dim, dtype=None):
    """y[..., i] = x[..., 0] * ... * x[..., i] along `dim`."""
    src = as_float32(x, "cumprod", allow_int=True)
    out = src * 1.0
    if x.ndim:
        d = _axis(dim, x.ndim)
        k = 1
        while k < x.shape[d]:
            out = out * _shifted_ones(out, d, k)
            k *= 2
    want = _result_dtype(x, dtype)
    return out if out.dtype is want else out.to(want)


def logcumsumexp(x, dim):
    """log(cumsum(exp(x))) along dim, shifted by the maximum for range."""
    from . import reduce, unary
    m = reduce.amax(x.detach(), dim, keepdim=True) if x.ndim else x.detach()
    return unary.log(cumsum(unary.exp(x - m), dim)) + m


