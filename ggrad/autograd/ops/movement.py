"""Shape ops: reshape, permute, slices, concatenation, indexing, gather, masked_fill, where.

Reshape and permute are GGML views (no copy); ops that need contiguous memory copy on demand.
Slices are views; their backward pads the gradient with zeros (`pad_ext`).
"""

from ...ggml import f32, i32, ops
from ...ggml.errors import DTypeError, ShapeError
from ..function import Function
from ..nodes import arg, contiguous as contiguous_node, emit, ne_of, shape_tensor, step_of
from . import elementwise as ew
from ..tensor import Tensor, _axis
from ..factory import arange, tensor


def _prod(shape):
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
        known = _prod(s for s in shape if s != -1)
        if known == 0 or numel % known:
            raise ShapeError(f"{op}: shape {shape} is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    if _prod(shape) != numel or any(s < 0 for s in shape):
        raise ShapeError(f"{op}: shape {shape} is invalid for input of size {numel}")
    if len(shape) > 4:
        raise ShapeError(f"{op}: GGML tensors have at most 4 dimensions; got shape {shape}")
    return shape


class Reshape(Function):
    primitive = True

    @staticmethod
    def forward(ctx, x, shape):
        step = step_of(x)
        ctx.in_shape = x.shape
        ne = ne_of(shape)
        node = ops.reshape_4d(step.context(), contiguous_node(step, x), *ne)
        return emit(step, node, shape, x.dtype, x.device)

    @staticmethod
    def backward(ctx, g):
        return Reshape.apply(g, ctx.in_shape), None


def reshape(x, *shape):
    shape = infer_shape(shape, x.numel())
    if shape == x.shape:
        return x
    return Reshape.apply(x, shape)


class Permute(Function):
    """Reorder dimensions (numpy's transpose with axes): output dim i is input dim perm[i]."""
    primitive = True

    @staticmethod
    def forward(ctx, x, perm):
        step = step_of(x)
        n = x.ndim
        ctx.perm = perm
        axes = [0, 1, 2, 3]
        for i, p in enumerate(perm):
            axes[n - 1 - p] = n - 1 - i
        node = ops.permute(step.context(), arg(step, x), *axes)
        return emit(step, node, tuple(x.shape[p] for p in perm), x.dtype, x.device)

    @staticmethod
    def backward(ctx, g):
        inverse = [0] * len(ctx.perm)
        for i, p in enumerate(ctx.perm):
            inverse[p] = i
        return Permute.apply(g, tuple(inverse)), None


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


class Contiguous(Function):
    primitive = True

    @staticmethod
    def forward(ctx, x):
        step = step_of(x)
        return emit(step, ops.cont(step.context(), arg(step, x)), x.shape, x.dtype, x.device)

    @staticmethod
    def backward(ctx, g):
        return g


def contiguous(x):
    from ...ggml import lib
    if lib.ggml_is_contiguous(x._g.ptr):
        return x
    return Contiguous.apply(x)


def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return reshape(x, 1)
    s, e = _axis(start_dim, x.ndim), _axis(end_dim, x.ndim)
    return reshape(x, x.shape[:s] + (_prod(x.shape[s:e + 1]),) + x.shape[e + 1:])


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
    return ew.Expand.apply(reshape(x, src), shape)


class Slice(Function):
    """x[starts[0]:stops[0], ...] with unit steps: a view; backward pads the gradient with zeros."""
    primitive = True

    @staticmethod
    def forward(ctx, x, starts, stops):
        step = step_of(x)
        ctx.in_shape, ctx.starts = x.shape, starts
        shape = tuple(b - a for a, b in zip(starts, stops))
        g = arg(step, x)
        if g.nb[0] != g.dtype.type_size:   # GGML views keep a unit innermost stride
            g = contiguous_node(step, x)
        nb = g.nb
        offset = 0
        for i, start in enumerate(reversed(starts)):
            offset += start * nb[i]
        ne = ne_of(shape)
        node = ops.view_4d(step.context(), g, ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], offset)
        return emit(step, node, shape, x.dtype, x.device)

    @staticmethod
    def backward(ctx, g):
        return PadTo.apply(g, ctx.starts, ctx.in_shape), None, None


class PadTo(Function):
    """Place x at offset `starts` inside zeros of `shape` (GGML pad_ext); backward slices it out."""
    primitive = True

    @staticmethod
    def forward(ctx, x, starts, shape):
        step = step_of(x)
        ctx.starts, ctx.stops = starts, tuple(a + n for a, n in zip(starts, x.shape))
        pads = []
        for i in range(4):
            d = len(shape) - 1 - i
            pads += [0, 0] if d < 0 else [starts[d], shape[d] - starts[d] - x.shape[d]]
        node = ops.pad_ext(step.context(), contiguous_node(step, x), *pads)
        return emit(step, node, shape, x.dtype, x.device)

    @staticmethod
    def backward(ctx, g):
        return Slice.apply(g, ctx.starts, ctx.stops), None, None


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


class Concat(Function):
    primitive = True

    @staticmethod
    def forward(ctx, a, b, dim):
        step = step_of(a, b)
        ctx.sizes, ctx.dim = (a.shape[dim], b.shape[dim]), dim
        node = ops.concat(step.context(), contiguous_node(step, a), contiguous_node(step, b), a.ndim - 1 - dim)
        shape = list(a.shape)
        shape[dim] += b.shape[dim]
        return emit(step, node, tuple(shape), a.dtype, a.device)

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.sizes
        return narrow(g, ctx.dim, 0, na), narrow(g, ctx.dim, na, nb), None


def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected a non-empty list of Tensors")
    first = tensors[0]
    d = _axis(dim, first.ndim)
    for t in tensors[1:]:
        if t.ndim != first.ndim or any(s != u for i, (s, u) in enumerate(zip(t.shape, first.shape)) if i != d):
            raise ShapeError(f"cat: sizes of tensors must match except in dimension {d}; got {first.shape} "
                             f"and {t.shape}")
        if t.dtype is not first.dtype:
            raise DTypeError(f"cat: all tensors must have one dtype; got {first.dtype.name} and {t.dtype.name}")
    out = first
    for t in tensors[1:]:
        out = Concat.apply(out, t, d)
    return out


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty list of Tensors")
    for t in tensors[1:]:
        if t.shape != tensors[0].shape:
            raise ShapeError(f"stack: expects each tensor to be equal size, got {tensors[0].shape} and {t.shape}")
    return cat([unsqueeze(t, dim) for t in tensors], dim)


class Split(Function):
    """Views of consecutive pieces of x along `dim`; backward concatenates the pieces' gradients."""
    primitive = True

    @staticmethod
    def forward(ctx, x, dim, sizes):
        ctx.dim = dim
        out, start = [], 0
        for size in sizes:
            starts = [0] * x.ndim
            stops = list(x.shape)
            starts[dim], stops[dim] = start, start + size
            out.append(Slice.forward(ctx, x, tuple(starts), tuple(stops)))
            start += size
        return tuple(out)

    @staticmethod
    def backward(ctx, *grads):
        out = grads[0]
        for g in grads[1:]:
            out = Concat.apply(out, g, ctx.dim)
        return out, None, None


def split(x, split_size_or_sections, dim=0):
    d = _axis(dim, x.ndim)
    n = x.shape[d]
    if isinstance(split_size_or_sections, int):
        if split_size_or_sections <= 0:
            raise ValueError(f"split: split_size must be positive, got {split_size_or_sections}")
        sizes = [min(split_size_or_sections, n - i) for i in range(0, n, split_size_or_sections)]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise ShapeError(f"split: sections {sizes} do not add up to dimension {d} of size {n}")
    if len(sizes) == 1:
        return (x,)
    return Split.apply(x, d, tuple(sizes))


def chunk(x, chunks, dim=0):
    n = x.shape[_axis(dim, x.ndim)]
    size = -(-n // chunks)
    return split(x, size, dim)


class GetRows(Function):
    """Rows of a 2-D `x` picked by int32 `index` (GGML get_rows); backward is get_rows_back."""
    primitive = True

    @staticmethod
    def forward(ctx, x, index):
        step = step_of(x, index)
        ctx.in_shape = x.shape
        ctx.save_for_backward(index)
        node = ops.get_rows(step.context(), contiguous_node(step, x), contiguous_node(step, index))
        return emit(step, node, (index.shape[0], x.shape[1]), x.dtype if x.dtype.is_float else f32, x.device)

    @staticmethod
    def backward(ctx, g):
        index, = ctx.saved_tensors
        step = step_of(g, index)
        like = shape_tensor(step, ctx.in_shape)
        node = ops.get_rows_back(step.context(), contiguous_node(step, g), contiguous_node(step, index), like)
        return emit(step, node, ctx.in_shape, f32, g.device), None


def _index_tensor(index, device, op):
    if not isinstance(index, Tensor):
        index = tensor(index, dtype=i32, device=device)
    if index.dtype is not i32:
        if index.dtype.is_float:
            raise DTypeError(f"{op}: indices must be an integer tensor, got {index.dtype.name}")
        index = index.to(i32)
    return index


def index_select(x, dim, index):
    """Entries of x along `dim` at the positions in the 1-D integer `index`."""
    index = _index_tensor(index, x.device, "index_select")
    if index.ndim != 1:
        raise ShapeError(f"index_select: index must be 1-D, got shape {index.shape}")
    d = _axis(dim, x.ndim)
    moved = x if d == 0 else transpose(x, 0, d)
    rows = reshape(moved, moved.shape[0], -1) if moved.ndim != 2 else moved
    picked = GetRows.apply(rows, index)
    out = reshape(picked, (index.shape[0],) + moved.shape[1:])
    out = out if d == 0 else transpose(out, 0, d)
    return out if out.dtype is x.dtype else out.to(x.dtype)


def embedding(index, weight):
    """Rows of `weight` for every entry of the integer tensor `index` (shape index.shape + (dim,))."""
    index = _index_tensor(index, weight.device, "embedding")
    flat = reshape(index, index.numel())
    out = GetRows.apply(weight, flat)
    return reshape(out, index.shape + (weight.shape[1],))


def gather(x, dim, index):
    """out[..., j] = x[..., index[..., j]] along the last dimension (dim must be -1 / last)."""
    index = _index_tensor(index, x.device, "gather")
    d = _axis(dim, x.ndim)
    if d != x.ndim - 1:
        moved = transpose(gather(transpose(x, d, -1), -1, transpose(index, d, -1)), d, -1)
        return moved
    if index.shape[:-1] != x.shape[:-1]:
        raise ShapeError(f"gather: index shape {index.shape} must match input shape {x.shape} except in the "
                         f"last dimension")
    rows = _prod(x.shape[:-1])
    n, k = x.shape[-1], index.shape[-1]
    base = reshape(arange(rows, device=x.device) * n, rows, 1)
    flat_index = reshape(index.to(f32) + base.to(f32), rows * k).to(i32)
    picked = GetRows.apply(reshape(x, rows * n, 1), flat_index)
    return reshape(picked, index.shape).to(x.dtype) if x.dtype is not f32 else reshape(picked, index.shape)


def masked_fill(x, mask, value):
    """x with `value` wherever `mask` (0/1 or bool-like, broadcastable) is nonzero.

    Infinite values are stored as the largest finite float32 of that sign (GGML has no select op, and
    0 * inf would be NaN); softmax treats both alike.
    """
    m = _as_mask(mask, x)
    v = max(min(float(value), 3.4028234663852886e38), -3.4028234663852886e38)
    return x * (1.0 - m) + m * v


def where(condition, a, b):
    """a where condition is nonzero, else b (broadcast)."""
    ref = a if isinstance(a, Tensor) else b
    m = _as_mask(condition, ref)
    return b + m * (a - b) if isinstance(b, Tensor) else m * (a - b) + b


def _as_mask(mask, like):
    if not isinstance(mask, Tensor):
        mask = tensor(mask, dtype=f32, device=like.device)
    if mask.dtype is not f32:
        mask = mask.to(f32)
    if mask.requires_grad:
        mask = mask.detach()
    return mask
