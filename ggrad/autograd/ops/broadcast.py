"""Broadcasting: numpy's shape rule, materialised expansion, and its adjoint, the sum back to a shape."""

from ...ggml import ops
from ...ggml.errors import ShapeError
from .. import lowering
from ..dtype_rules import NUMERIC
from ..pending import ne_of
from ..primitive import Primitive


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
    """Sum a broadcast gradient `g` back down to `shape` (lowered per backend: lowering.py)."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    kept = _kept_trailing(g.shape, shape)
    if kept is not None and lowering.for_device(g.device).reduce_leading == "sum_rows":
        return _sum_leading(g, shape, kept)
    return SumTo.apply(g, shape)


def _kept_trailing(g_shape, shape):
    """How many trailing dimensions of g survive when `shape` only sums away leading ones, else None."""
    padded = (1,) * (len(g_shape) - len(shape)) + tuple(shape)
    for kept in range(len(g_shape) + 1):
        lead, trail = padded[:len(g_shape) - kept], padded[len(g_shape) - kept:]
        if all(n == 1 for n in lead) and trail == g_shape[len(g_shape) - kept:]:
            if kept < len(g_shape):
                return kept
    return None


def _sum_leading(g, shape, kept):
    """Sum over g's leading dimensions as sum_rows of a transposed copy (fast where repeat_back is not)."""
    rest = g.shape[len(g.shape) - kept:]
    cols = views.prod(rest)
    flat = views.reshape(g, -1, cols)
    summed = reduce.SumRows.apply(views.contiguous(views.transpose(flat, 0, 1)))   # (cols, 1)
    return views.reshape(summed, shape)


def expand_to(x, shape):
    """`x` repeated to `shape` (x itself when it already has it)."""
    shape = tuple(shape)
    return x if x.shape == shape else Expand.apply(x, shape)


# views and reduce build on Expand and SumTo above: imported last, so either may be loaded first
from . import reduce, views  # noqa: E402
