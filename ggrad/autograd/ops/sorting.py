"""Sorting: sort, argsort, topk, msort, kthvalue-free selection by GGML's argsort / argsort_top_k.

GGML sorts the rows (last dimension) of float32; other dimensions are moved last first. Values are
gathered by the indices, so gradients flow to the picked entries (GGML get_rows_back).

`stable=True` keeps equal values in their input order with a second sort: the sorted values are
numbered by run of equal values, and (run * n + original index) is sorted again, exactly (in float32)
while n * n < 2**24 (rows of up to 4096 entries).

nan sorts as the largest value, as PyTorch's (keyed as +inf: among nan and +inf the order is GGML's).
Indices are int64 (held as GGML's int32). Differences from PyTorch: with stable=False the order of equal
values is GGML's (std::sort on the CPU), which PyTorch's default does not promise either.
"""

from collections import namedtuple

import numpy as np

from ...ggml import f32, ops
from ..torch_dtypes import INT64
from ...ggml.errors import ShapeError
from ..dtype_rules import as_float32
from ..factory import tensor, zeros
from ..grad_mode import no_grad
from ..primitive import Primitive
from ..tensor import _axis
from . import unary as un
from .indexing import gather
from .math import isnan
from .scan import cumsum
from .selection import where
from .views import contiguous
from .view_primitives import PadTo, Slice
from ..declaration import declare

_STABLE_MAX = 4096

values_indices = namedtuple("values_indices", ["values", "indices"])


class ArgsortRows(Primitive):
    """Indices that sort each row ("asc" or "desc"), int64."""

    @staticmethod
    def build(ctx, graph, x, order):
        return ops.argsort(graph.ctx, x, order)

    @staticmethod
    def result_dtype(x, order):
        return INT64   # held as GGML's int32


class TopkRows(Primitive):
    """Indices of the k largest entries of each row, largest first, int64."""

    @staticmethod
    def build(ctx, graph, x, k):
        return ops.argsort_top_k(graph.ctx, x, k)

    @staticmethod
    def shape(x, k):
        return x.shape[:-1] + (k,)

    @staticmethod
    def result_dtype(x, k):
        return INT64   # held as GGML's int32


def _nan_last(src, x):
    """The sort key of float data: nan as +inf, the largest (PyTorch orders nan above every number)."""
    if not x.dtype.is_float:
        return src
    with no_grad():
        return where(isnan(src), float("inf"), src)


def _moved(x, d, fn):
    if d == x.ndim - 1:
        return fn(x)
    return fn(contiguous(x.transpose(d, -1))).transpose(d, -1)


@declare(method=True)
def argsort(x, dim=-1, descending=False, stable=False):
    """Indices that sort x along `dim` (int64)."""
    src = as_float32(x, "argsort", allow_int=True)
    if x.ndim == 0:
        return zeros((), dtype=INT64, device=x.device)
    order = "desc" if descending else "asc"
    d = _axis(dim, x.ndim)
    if stable and x.shape[d] > _STABLE_MAX:
        raise ShapeError(f"argsort: stable=True sorts rows of at most {_STABLE_MAX} entries, got {x.shape[d]} "
                         f"(dimension {d} of {x.shape})")
    rows = _stable_rows if stable else ArgsortRows.apply
    return _moved(_nan_last(src.detach(), x), d, lambda t: rows(t, order))


def _stable_rows(x, order):
    """argsort of each row with ties in index order (see the module docstring)."""
    with no_grad():
        first = ArgsortRows.apply(x, order)
        if x.shape[-1] < 2:
            return first
        ranked = gather(x, -1, first)
        n = x.shape[-1]
        starts = (0,) * x.ndim
        before = PadTo.apply(Slice.apply(ranked, starts, x.shape[:-1] + (n - 1,)), starts[:-1] + (1,), x.shape)
        opens = np.ones(n, dtype=np.float32)
        opens[0] = 0.0   # the first entry opens run 0
        new_run = un.Step.apply(un.abs(ranked - before)) * tensor(opens, device=x.device)
        key = cumsum(new_run, -1) * float(n) + first.to(f32)
        return gather(first, -1, ArgsortRows.apply(key, "asc"))


@declare(method=True)
def sort(x, dim=-1, descending=False, stable=False):
    """(values, indices) of x sorted along `dim`."""
    index = argsort(x, dim, descending, stable)
    if x.ndim == 0:
        return values_indices(x * 1, index)
    return values_indices(gather(x, dim, index), index)


@declare(method=True)
def msort(x):
    return sort(x, 0).values


@declare(method=True)
def topk(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002 (PyTorch's name)
    """(values, indices) of the k largest (or smallest) entries along `dim`, largest (smallest) first."""
    d = _axis(dim, x.ndim) if x.ndim else 0
    n = x.shape[d] if x.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError(f"topk: selected index k={k} out of range for dimension {d} of size {n} "
                           f"(shape {x.shape})")
    src = as_float32(x, "topk", allow_int=True).detach()
    if x.ndim == 0:
        return values_indices(x * 1, zeros((), dtype=INT64, device=x.device))
    if k == 0:
        shape = x.shape[:d] + (0,) + x.shape[d + 1:]
        return values_indices(zeros(shape, dtype=x.dtype, device=x.device), zeros(shape, dtype=INT64,
                                                                                  device=x.device))
    key = _nan_last(src, x)
    key = key if largest else -key
    index = _moved(key, d, lambda t: TopkRows.apply(t, k))
    return values_indices(gather(x, d, index), index)


