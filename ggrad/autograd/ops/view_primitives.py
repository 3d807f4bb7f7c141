"""The view and padding primitives of <=4-D tensors: reshape, permute, contiguous copies, slices, writes into a
slice and padding. views.py gives them PyTorch's view semantics and folding.py composes them for more dimensions."""

from ...ggml import f32, ops
from ...ggml.errors import ShapeError
from ..factory import zeros
from ..pending import ne_of
from ..primitive import Primitive


def prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def infer_shape(shape, numel, op="reshape"):
    """Resolve one -1 in `shape` so that it holds `numel` elements."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise ShapeError(f"{op}: only one dimension can be -1, got {shape}")
    if -1 in shape:
        known = prod(s for s in shape if s != -1)
        if known == 0 or numel % known:
            raise ShapeError(f"{op}: shape {shape} is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    if prod(shape) != numel or any(s < 0 for s in shape):
        raise ShapeError(f"{op}: shape {shape} is invalid for input of size {numel}")
    return shape


class Reshape(Primitive):
    """The same elements in another shape (a view of contiguous memory)."""

    @staticmethod
    def build(ctx, graph, x, shape):
        return ops.reshape_4d(graph.ctx, x, *ne_of(shape))

    @staticmethod
    def shape(x, shape):
        return shape

    @staticmethod
    def backward(ctx, g):
        return Reshape.apply(g, ctx.shapes[0]), None


class Permute(Primitive):
    """Reorder dimensions (numpy's transpose with axes): output dim i is input dim perm[i]."""
    views = True

    @staticmethod
    def build(ctx, graph, x, perm):
        ctx.perm = perm
        n = len(perm)
        axes = [0, 1, 2, 3]
        for i, p in enumerate(perm):
            axes[n - 1 - p] = n - 1 - i
        return ops.permute(graph.ctx, x, *axes)

    @staticmethod
    def shape(x, perm):
        return tuple(x.shape[p] for p in perm)

    @staticmethod
    def backward(ctx, g):
        inverse = [0] * len(ctx.perm)
        for i, p in enumerate(ctx.perm):
            inverse[p] = i
        return Permute.apply(g, tuple(inverse)), None


class Contiguous(Primitive):
    """A contiguous copy of a strided view."""
    views = True

    @staticmethod
    def build(ctx, graph, x):
        return ops.cont(graph.ctx, x)

    @staticmethod
    def backward(ctx, g):
        return g


class Slice(Primitive):
    """x[starts[0]:stops[0], ...] with unit steps: a view; backward pads the gradient with zeros."""
    views = True

    @staticmethod
    def build(ctx, graph, x, starts, stops):
        ctx.starts = starts
        if x.nb[0] != x.dtype.type_size:   # GGML views keep a unit innermost stride
            x = ops.cont(graph.ctx, x)
        nb = x.nb
        offset = 0
        for i, start in enumerate(reversed(starts)):
            offset += start * nb[i]
        ne = ne_of(tuple(b - a for a, b in zip(starts, stops)))
        return ops.view_4d(graph.ctx, x, ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], offset)

    @staticmethod
    def shape(x, starts, stops):
        return tuple(b - a for a, b in zip(starts, stops))

    @staticmethod
    def backward(ctx, g):
        return PadTo.apply(g, ctx.starts, ctx.shapes[0]), None, None


class SliceScatter(Primitive):
    """x with y written over the block of x at offset `starts` (GGML set, on f32 or i32 storage); the
    gradient goes to x outside the block and to y inside it."""

    @staticmethod
    def build(ctx, graph, x, y, starts):
        ctx.starts = starts
        stored = x.dtype
        if stored.name not in ("f32", "i32"):
            x, y = ops.cast(graph.ctx, x, f32), ops.cast(graph.ctx, y, f32)
        nb = x.nb
        offset = 0
        for i, start in enumerate(reversed(starts)):
            offset += start * nb[i]
        out = ops.set(graph.ctx, x, y, nb[1], nb[2], nb[3], offset)
        return out if out.dtype is stored else ops.cast(graph.ctx, out, stored)

    @staticmethod
    def backward(ctx, g):
        block = ctx.shapes[1]
        stops = tuple(a + n for a, n in zip(ctx.starts, block))
        cleared = SliceScatter.apply(g, zeros(block, dtype=g.dtype, device=g.device), ctx.starts)
        return cleared, Slice.apply(g, ctx.starts, stops), None


class PadTo(Primitive):
    """Place x at offset `starts` inside zeros of `shape` (GGML pad_ext); backward slices it out."""

    @staticmethod
    def build(ctx, graph, x, starts, shape):
        inner = ctx.shapes[0]
        ctx.starts, ctx.stops = starts, tuple(a + n for a, n in zip(starts, inner))
        pads = []
        for i in range(4):
            d = len(shape) - 1 - i
            pads += [0, 0] if d < 0 else [starts[d], shape[d] - starts[d] - inner[d]]
        return ops.pad_ext(graph.ctx, x, *pads)

    @staticmethod
    def shape(x, starts, shape):
        return shape

    @staticmethod
    def backward(ctx, g):
        return Slice.apply(g, ctx.starts, ctx.stops), None, None


# ---- view steps: how a view derives from its input, and how a write into it goes back -------------
