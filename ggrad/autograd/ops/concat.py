"""`Concat`: two tensors joined along one dimension, by ggrad's kernel or GGML's concat as the lowering says
(joins.py builds cat, stack and the splits on it; folding.py its >4-D form)."""

from ...ggml import f32, kernels, ops
from ..lowering import choice
from ..primitive import Primitive


class Concat(Primitive):
    """a and b joined along `dim`; backward narrows the gradient into the two parts."""

    @staticmethod
    def build(ctx, graph, a, b, dim):
        ctx.dim = dim
        return join_nodes(graph, a, b, len(ctx.shapes[0]) - 1 - dim)

    @staticmethod
    def shape(a, b, dim):
        shape = list(a.shape)
        shape[dim] += b.shape[dim]
        return tuple(shape)

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.shapes[0][ctx.dim], ctx.shapes[1][ctx.dim]
        return g.narrow(ctx.dim, 0, na), g.narrow(ctx.dim, na, nb), None   # views.narrow (views build on this)


@choice("concat")
def join_nodes(graph, a, b, ggml_dim):
    """The node of nodes a and b (any strides) joined along GGML dimension `ggml_dim`: GGML's concat, or
    ggrad's kernel where the lowering says so."""
    return ops.concat(graph.ctx, a, b, ggml_dim)


@join_nodes.alternative("kernel", fits=lambda a, b, ggml_dim: a.dtype is f32 and b.dtype is f32)
def _join_by_kernel(graph, a, b, ggml_dim):
    return kernels.concat_f32(graph.ctx, a, b, ggml_dim)
