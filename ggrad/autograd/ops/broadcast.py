"""Broadcasting: numpy's shape rule, materialised expansion, and its adjoint, the sum back to a shape."""

from ...ggml import ops
from ...ggml.errors import ShapeError
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
    """Sum a broadcast gradient `g` back down to `shape`."""
    shape = tuple(shape)
    return g if g.shape == shape else SumTo.apply(g, shape)


def expand_to(x, shape):
    """`x` repeated to `shape` (x itself when it already has it)."""
    shape = tuple(shape)
    return x if x.shape == shape else Expand.apply(x, shape)
