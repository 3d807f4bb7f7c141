"""Cumulative sums and products along a dimension.

cumsum is GGML's cumsum over rows (the dimension moved last); its gradient is the reversed cumulative
sum of the gradient. cumprod is a Hillis-Steele scan of products (log2(n) steps of multiply-by-shifted),
so its gradient, composed from the same ops, is exact with zeros in the input, where the usual
division by x is not.

Integer and bool inputs give int64, as PyTorch (held as GGML's int32).
"""

import numpy as np

from ...ggml import ops
from ..dtype_rules import as_float32
from ..factory import tensor
from ..primitive import Primitive
from ..tensor import _axis
from ..torch_dtypes import INT64, resolve
from .shape_ops import flip
from . import folding
from .views import contiguous
from .view_primitives import PadTo, Slice
from ..declaration import declare


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
    """PyTorch's: the given dtype, else int64 for integer and bool inputs, else the input's."""
    if dtype is not None:
        return resolve(dtype)
    return x.dtype if x.dtype.is_float else INT64


@declare(method=True, inplace=True)
def cumsum(x, dim, dtype=None):
    """y[..., i] = x[..., 0] + ... + x[..., i] along `dim`."""
    src = as_float32(x, "cumsum", allow_int=True)
    if x.ndim == 0:
        out = src * 1.0
    else:
        out = _along_last(src, _axis(dim, x.ndim), CumsumRows.apply)
    want = _result_dtype(x, dtype)
    return out if out.dtype is want else out.to(want)


@declare(method=True)
def cumprod(x, dim, dtype=None):
    """y[..., i] = x[..., 0] * ... * x[..., i] along `dim`."""
    src = as_float32(x, "cumprod", allow_int=True)
    out = src * 1.0
    if x.ndim > 4:
        out = folding.along(out, _axis(dim, x.ndim), lambda y, d: doubling_scan(y, d, lambda a, b: a * b, 1.0))
    elif x.ndim:
        out = doubling_scan(out, _axis(dim, x.ndim), lambda a, b: a * b, 1.0)
    want = _result_dtype(x, dtype)
    return out if out.dtype is want else out.to(want)


def _shifted(y, d, k, fill):
    """y shifted by k along d, with `fill` coming in at the start."""
    n = y.shape[d]
    stops = list(y.shape)
    stops[d] = n - k
    starts = [0] * y.ndim
    starts[d] = k
    moved = PadTo.apply(Slice.apply(y, (0,) * y.ndim, tuple(stops)), tuple(starts), y.shape)
    edge = np.zeros([1 if i != d else n for i in range(y.ndim)], dtype=np.float32)
    edge[(slice(None),) * d + (slice(0, k),)] = fill
    return moved + tensor(edge, device=y.device)


def doubling_scan(x, d, combine, fill):
    """The inclusive scan of `combine` along d in log2(n) steps: y_i <- combine(y_i, y_{i-k}), k = 1, 2, 4..."""
    out, k = x, 1
    while k < x.shape[d]:
        out = combine(out, _shifted(out, d, k, fill))
        k *= 2
    return out



