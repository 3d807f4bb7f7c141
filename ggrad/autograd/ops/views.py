"""Movement ops: reshape, permute, slices and padding, and the shape helpers built on them.

Reshape, permute and slices are GGML views (no copy); ops that need contiguous memory copy on demand.
A slice's backward pads the gradient with zeros (`pad_ext`).
"""

from ...ggml import ops
from ...ggml.errors import ShapeError
from ..pending import ne_of
from ..primitive import Primitive
from ..tensor import _axis
from .broadcast import Expand


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
    if len(shape) > 4:
        raise ShapeError(f"{op}: GGML tensors have at most 4 dimensions; got shape {shape}")
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


# ---- public functions ----------------------------------------------------------------------------
def reshape(x, *shape):
    shape = infer_shape(shape, x.numel())
    if shape == x.shape:
        return x
    return Reshape.apply(x, shape)


def permute(x, *dims):
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    dims = tuple(_axis(d, x.ndim) for d in dims)
    if sorted(dims) != list(range(x.ndim)):
        raise ShapeError(f"permute: dims {dims} are not a permutation of the {x.ndim} dimensions of {x.shape}")
    if dims == tuple(range(x.ndim)):
        return x
    return Permute.apply(x, dims)


def transpose(x, dim0, dim1):
    if x.ndim < 2:
        return x
    d0, d1 = _axis(dim0, x.ndim), _axis(dim1, x.ndim)
    perm = list(range(x.ndim))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return permute(x, perm)


def contiguous(x):
    return x if x._node.is_contiguous else Contiguous.apply(x)


def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return reshape(x, 1)
    s, e = _axis(start_dim, x.ndim), _axis(end_dim, x.ndim)
    return reshape(x, x.shape[:s] + (prod(x.shape[s:e + 1]),) + x.shape[e + 1:])


def squeeze(x, dim=None):
    if dim is None:
        return reshape(x, tuple(s for s in x.shape if s != 1))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    dims = {_axis(d, x.ndim) for d in dims}
    return reshape(x, tuple(s for i, s in enumerate(x.shape) if not (i in dims and s == 1)))


def unsqueeze(x, dim):
    d = _axis(dim, x.ndim + 1)
    return reshape(x, x.shape[:d] + (1,) + x.shape[d:])


def expand(x, *shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = tuple(shape)
    if len(shape) < x.ndim:
        raise ShapeError(f"expand: the number of sizes {len(shape)} is less than the tensor's dims {x.ndim}")
    src = (1,) * (len(shape) - x.ndim) + x.shape
    shape = tuple(s if n == -1 else n for s, n in zip(src, shape))
    for s, n in zip(src, shape):
        if s != n and s != 1:
            raise ShapeError(f"expand: cannot expand shape {x.shape} to {shape}")
    if shape == x.shape:
        return x
    return Expand.apply(reshape(x, src), shape)


def narrow(x, dim, start, length):
    d = _axis(dim, x.ndim)
    if start < 0:
        start += x.shape[d]
    if not 0 <= start <= start + length <= x.shape[d]:
        raise IndexError(f"narrow: [{start}, {start + length}) is outside dimension {d} of size {x.shape[d]}")
    starts = [0] * x.ndim
    stops = list(x.shape)
    starts[d], stops[d] = start, start + length
    return Slice.apply(x, tuple(starts), tuple(stops))
