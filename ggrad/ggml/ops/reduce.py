"""Reductions along rows and whole tensors, comparisons, cumulative sums and sorting."""

from .._lib import lib
from . import _check as C
from ._check import make, tensor

__all__ = ["sum", "sum_rows", "mean", "argmax", "count_equal", "cumsum", "argsort", "argsort_top_k", "top_k"]

SORT_ORDERS = {"asc": lib.GGML_SORT_ORDER_ASC, "desc": lib.GGML_SORT_ORDER_DESC}
_INT32_MAX = 2**31 - 1


def _rows(op, a, types):
    pa = tensor(op, "a", a)
    C.types(op, "a", pa, types)
    C.contiguous_rows(op, "a", pa)
    return pa


def sum(ctx, a):
    """The sum of all elements of `a`, as a 1-element tensor of a's type.

    Args:
        ctx: the Context the result is made in.
        a: input tensor (f32/f16/bf16) with contiguous rows.
    """
    return make(ctx, "sum", lib.ggml_sum, _rows("sum", a, C.FLOATS))


def sum_rows(ctx, a):
    """Sums along rows (dim 0): ne [n0, n1, n2, n3] -> [1, n1, n2, n3].

    Args:
        ctx: the Context the result is made in.
        a: f32 input with contiguous rows.
    """
    return make(ctx, "sum_rows", lib.ggml_sum_rows, _rows("sum_rows", a, C.ONLY_F32))


def mean(ctx, a):
    """Means along rows (dim 0): ne [n0, n1, n2, n3] -> [1, n1, n2, n3], f32.

    Args:
        ctx: the Context the result is made in.
        a: f32 input with contiguous rows.
    """
    return make(ctx, "mean", lib.ggml_mean, _rows("mean", a, C.ONLY_F32))


def argmax(ctx, a):
    """Index of the largest element of each row of a matrix: ne [n0, n1] -> i32 [n1].

    Args:
        ctx: the Context the result is made in.
        a: f32 matrix (ne[2] == ne[3] == 1) with contiguous rows.
    """
    pa = _rows("argmax", a, C.ONLY_F32)
    if pa.ne[2] != 1 or pa.ne[3] != 1:
        C.fail("argmax", f"a must be a matrix (ne[2] == ne[3] == 1), got ne={C.ne(pa)}")
    if pa.ne[0] > _INT32_MAX:
        C.fail("argmax", f"rows of {pa.ne[0]} elements are longer than INT32_MAX")
    return make(ctx, "argmax", lib.ggml_argmax, pa)


def count_equal(ctx, a, b):
    """How many elements of `a` and `b` are equal, as an i64 scalar.

    Args:
        ctx: the Context the result is made in.
        a: i32 tensor (e.g. ops.argmax of predictions).
        b: i32 tensor of the same shape (e.g. labels).
    """
    pa = tensor("count_equal", "a", a)
    pb = tensor("count_equal", "b", b)
    C.same_shape("count_equal", pa, pb)
    C.types("count_equal", "a", pa, frozenset({C.I32}))
    C.types("count_equal", "b", pb, frozenset({C.I32}))
    return make(ctx, "count_equal", lib.ggml_count_equal, pa, pb)


def cumsum(ctx, a):
    """Cumulative sums along rows (dim 0), same shape.

    Args:
        ctx: the Context the result is made in.
        a: f32 input with contiguous rows.
    """
    return make(ctx, "cumsum", lib.ggml_cumsum, _rows("cumsum", a, C.ONLY_F32))


def argsort(ctx, a, order):
    """Indices that sort each row: i32 of a's shape.

    Args:
        ctx: the Context the result is made in.
        a: f32 input with contiguous rows.
        order: "asc" or "desc" (or the `enum ggml_sort_order` value).
    """
    pa = _rows("argsort", a, C.ONLY_F32)
    code = C.enum("argsort", "order", order, SORT_ORDERS)
    if pa.ne[0] > _INT32_MAX:
        C.fail("argsort", f"rows of {pa.ne[0]} elements are longer than INT32_MAX")
    return make(ctx, "argsort", lib.ggml_argsort, pa, code)


def _top(op, fn, a, k):
    pa = _rows(op, a, C.ONLY_F32)
    k = C.integer(op, "k", k, lo=1)
    if k > pa.ne[0]:
        C.fail(op, f"k={k} is larger than the row length a.ne[0]={pa.ne[0]} (a ne={C.ne(pa)})")
    return pa, k


def argsort_top_k(ctx, a, k):
    """Indices of the `k` largest elements of each row, largest first (argsort + view): i32 [k, ...].

    Args:
        ctx: the Context the result is made in.
        a: f32 input with contiguous rows.
        k: how many, 1 <= k <= a.ne[0].
    """
    pa, k = _top("argsort_top_k", lib.ggml_argsort_top_k, a, k)
    return make(ctx, "argsort_top_k", lib.ggml_argsort_top_k, pa, k)


def top_k(ctx, a, k):
    """Indices of the `k` largest elements of each row, in no particular order: i32 [k, ...].

    Args:
        ctx: the Context the result is made in.
        a: f32 input with contiguous rows.
        k: how many, 1 <= k <= a.ne[0].
    """
    pa, k = _top("top_k", lib.ggml_top_k, a, k)
    return make(ctx, "top_k", lib.ggml_top_k, pa, k)
