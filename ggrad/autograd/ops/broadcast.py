"""Broadcasting: numpy's shape rule, materialised expansion, and its adjoint, the sum back to a shape."""

from ...ggml import f32, ops
from ...ggml.errors import ShapeError
from ..dtype_rules import NUMERIC
from ..lowering import choice
from ..pending import copy_node, ne_of
from ..primitive import Primitive
from ..declaration import declare
from ..arguments import kinds


@kinds(a=None, b=None)
@declare()
def broadcast_shapes(a, b, op="broadcast"):
    """numpy's broadcasting rule, with an error naming the op and both shapes."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else 1
        db = b[-i] if i <= len(b) else 1
        if da != db and da != 1 and db != 1:
            raise ShapeError(f"{op}: shapes {tuple(a)} and {tuple(b)} cannot be broadcast "
                             f"(dimension {-i}: {da} vs {db})")
        out.append(max(da, db) if da != 0 and db != 0 else 0)
    return tuple(reversed(out))


class SumTo(Primitive):
    """Sum over the dimensions that broadcasting added or stretched (GGML repeat_back)."""
    dtypes = NUMERIC

    @staticmethod
    def build(ctx, graph, x, shape):
        return ops.repeat_back(graph.ctx, x, graph.shape_only(shape, x.dtype))

    @staticmethod
    def shape(x, shape):
        return shape

    @staticmethod
    def backward(ctx, g):
        return Expand.apply(g, ctx.shapes[0]), None


class Expand(Primitive):
    """Repeat along broadcast dimensions (a copy: GGML has no zero-stride views)."""

    @staticmethod
    def build(ctx, graph, x, shape):
        return ops.repeat_4d(graph.ctx, x, *ne_of(shape))

    @staticmethod
    def shape(x, shape):
        return shape

    @staticmethod
    def backward(ctx, g):
        return reduce_to(g, ctx.shapes[0]), None


def reduce_to(g, shape):
    """Sum a broadcast gradient `g` back down to `shape` (sums over leading dimensions only: LeadingSums,
    lowered per backend)."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    if _kept_trailing(g.shape, shape) is None:
        return SumTo.apply(g, shape)
    return LeadingSums.apply(g, shape)


@declare(function=False, method=True)
def sum_to_size(input, *size):
    """`input` summed over the dimensions it was broadcast along, down to `size` (PyTorch's
    `Tensor.sum_to_size`; `size` as ints or one sequence)."""
    if not size:
        raise TypeError('sum_to_size() missing 1 required positional arguments: "size"')
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in shape):
        raise TypeError(f"sum_to_size(): argument 'size' (position 1) must be tuple of ints, not "
                        f"{type(size[0]).__name__}")
    padded = (1,) * (len(input.shape) - len(shape)) + shape
    if len(shape) > len(input.shape) or any(n != 1 and n != m for n, m in zip(padded, input.shape)):
        raise RuntimeError(f"size {{{list(shape)}}} is not expandable to size {{{list(input.shape)}}}.")
    return reduce_to(input, shape)


def _kept_trailing(g_shape, shape):
    """How many trailing dimensions of g survive when `shape` only sums away leading ones, else None."""
    padded = (1,) * (len(g_shape) - len(shape)) + tuple(shape)
    for kept in range(len(g_shape) + 1):
        lead, trail = padded[:len(g_shape) - kept], padded[len(g_shape) - kept:]
        if all(n == 1 for n in lead) and trail == g_shape[len(g_shape) - kept:]:
            if kept < len(g_shape):
                return kept
    return None


class LeadingSums(Primitive):
    """The sums of g over its leading dimensions into `shape` (g's trailing dimensions, after any leading
    ones), as the backend takes them (leading_sums_node), one recorded op."""
    dtypes = NUMERIC

    @staticmethod
    def build(ctx, graph, g, shape):
        return leading_sums_node(graph, g, shape)

    @staticmethod
    def shape(g, shape):
        return shape

    @staticmethod
    def backward(ctx, gy):
        return Expand.apply(gy, ctx.shapes[0]), None


@choice("reduce_leading")
def leading_sums_node(graph, x, shape):
    """GGML node of the sums of contiguous node x over its leading dimensions into `shape` (its trailing
    ones): repeat_back, or as the backend's lowering says (below)."""
    return ops.repeat_back(graph.ctx, x, graph.shape_only(shape, x.dtype))


@leading_sums_node.alternative("out_prod")
def _leading_sums_by_out_prod(graph, x, shape):
    """ones^T @ x's rows of prod(shape) elements with the pending graph's column of ones
    (`PendingGraph.ones`), reading x in place."""
    def sums(c, rows, ne):
        out = ops.out_prod(c, rows, ops.reshape_2d(c, graph.ones(rows.ne[1]), 1, rows.ne[1]))   # [cols, 1]
        return out if ne == [rows.ne[0], 1, 1, 1] else ops.reshape_4d(c, out, *ne)
    return _summed_in_f32(graph, x, shape, sums)


@leading_sums_node.alternative("sum_rows")
def _leading_sums_by_sum_rows(graph, x, shape):
    """sum_rows of a transposed copy (fast where repeat_back is not)."""
    def sums(c, rows, ne):
        transposed = copy_node(graph, ops.transpose(c, rows))
        return ops.reshape_4d(c, ops.sum_rows(c, transposed), *ne)   # sum_rows gives [1, cols]
    return _summed_in_f32(graph, x, shape, sums)


def _summed_in_f32(graph, x, shape, sums):
    """`sums(ctx, rows, ne)` of node x as 2-D rows of prod(shape) elements, in float32 (both lowered sums take
    float32 only: another dtype is cast to it and the result back)."""
    c = graph.ctx
    ne = ne_of(shape)
    cols = ne[0] * ne[1] * ne[2] * ne[3]
    rows = x if x.dtype is f32 else ops.cast(c, x, f32)
    if list(rows.ne) != [cols, rows.nelements // cols, 1, 1]:
        rows = ops.reshape_2d(c, rows, cols, rows.nelements // cols)
    out = sums(c, rows, ne)
    return out if x.dtype is f32 else ops.cast(c, out, x.dtype)


@choice("row_sum")
def row_sums_node(graph, x):
    """GGML node of the sums of x's rows, [1, ne1, ne2, ne3]: sum_rows, or where the backend's lowering says
    so and x is contiguous f32, mul_mat of x's rows with a column of ones."""
    return ops.sum_rows(graph.ctx, x)


@row_sums_node.alternative("mul_mat", fits=lambda x: x.dtype is f32 and x.is_contiguous)
def _row_sums_by_mul_mat(graph, x):
    ne0, ne1, ne2, ne3 = x.ne
    rows = ops.reshape_2d(graph.ctx, x, ne0, ne1 * ne2 * ne3)
    return ops.reshape_4d(graph.ctx, ops.mul_mat(graph.ctx, rows, graph.ones(ne0)), 1, ne1, ne2, ne3)


@choice("column_broadcast")
def full_operand(graph, a, b):
    """`b` as a GGML binary op with `a` reads it: b itself, or where b is f32 with one value per row of a and
    the backend's lowering says so, b written out to a's shape by out_prod with a column of ones."""
    return b


def _one_value_a_row(a, b):
    return (b.ne[0] == 1 < a.ne[0] and list(b.ne[1:]) == list(a.ne[1:]) and b.dtype is f32
            and b.is_contiguous)


@full_operand.alternative("out_prod", fits=_one_value_a_row)
def _column_written_out(graph, a, b):
    rows = ops.reshape_2d(graph.ctx, b, b.ne[1] * b.ne[2] * b.ne[3], 1)
    return ops.reshape_4d(graph.ctx, ops.out_prod(graph.ctx, graph.ones(a.ne[0]), rows), *a.ne)


def expand_to(x, shape):
    """`x` repeated to `shape` (x itself when it already has it)."""
    shape = tuple(shape)
    return x if x.shape == shape else Expand.apply(x, shape)
