"""Joining and splitting: cat, stack, split, chunk."""

from ...ggml.errors import ArgumentError, ShapeError
from ..dtype_rules import result_type
from ..function import Function
from ..grad_mode import is_grad_enabled
from .. import view_tracking
from ..tensor import Tensor, _axis
from . import folding
from .concat import Concat
from .views import SliceStep, slice_view, unsqueeze
from .view_primitives import Slice
from ..declaration import declare


def sequence(tensors, op):
    """`tensors` as a list; a single Tensor is refused, as PyTorch (iterating it would give its rows)."""
    if isinstance(tensors, Tensor):
        raise TypeError(f"{op}(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor")
    return list(tensors)


@declare(aliases=("concat", "concatenate"))
def cat(tensors, dim=0):
    tensors = sequence(tensors, "cat")
    if not tensors:
        raise ValueError("cat: expected a non-empty list of Tensors")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"cat(): expected a sequence of Tensors, got {type(t).__name__}")
    dtype = result_type(*tensors)   # PyTorch promotes the pieces to one dtype
    tensors = [t if t.dtype is dtype else t.to(dtype) for t in tensors]
    sized = [t for t in tensors if t.shape != (0,)] or tensors   # PyTorch skips legacy empty 1-D pieces
    first = sized[0]
    d = _axis(dim, first.ndim)
    for t in sized[1:]:
        if t.ndim != first.ndim or any(s != u for i, (s, u) in enumerate(zip(t.shape, first.shape)) if i != d):
            raise ShapeError(f"cat: sizes of tensors must match except in dimension {d}; got {first.shape} "
                             f"and {t.shape}")
    parts = [t for t in tensors if t.numel()] or tensors   # zero-size pieces add nothing
    empty = [t for t in tensors if not t.numel() and t.requires_grad]
    if empty and len(parts) < len(tensors) and is_grad_enabled():
        # ... but get their (empty) gradient, as PyTorch's: the result times 1 + 0 * (their sums, 0)
        joined = _joined(parts, d, first.ndim, len(tensors))
        return joined * (sum(t.sum() for t in empty) * 0.0 + 1.0)
    return _joined(parts, d, first.ndim, len(tensors))


def _joined(parts, d, ndim, pieces):
    """The non-empty `parts` (of `pieces` given) joined along d."""
    if len(parts) == 1 and pieces > 1:
        return parts[0] * 1   # a new tensor, as cat always gives
    if ndim > 4:
        return folding.cat(parts, d)
    # joined pairwise, level by level (a balanced tree): each element is copied log2(len(parts)) times, where a
    # left-to-right chain copies the first part len(parts) - 1 times (a gradient bucket of 52 parts: 6 against 51)
    while len(parts) > 1:
        parts = [Concat.apply(parts[i], parts[i + 1], d) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return parts[0]


@declare()
def stack(tensors, dim=0):
    tensors = sequence(tensors, "stack")
    if not tensors:
        raise ValueError("stack: expected a non-empty list of Tensors")
    for t in tensors[1:]:
        if t.shape != tensors[0].shape:
            raise ShapeError(f"stack: expects each tensor to be equal size, got {tensors[0].shape} and {t.shape}")
    return cat([unsqueeze(t, dim) for t in tensors], dim)


class Split(Function):
    """Views of consecutive pieces of x along `dim` (several outputs); backward concatenates the
    pieces' gradients. Forward builds one Slice view per piece, recorded as this one op."""
    primitive = True

    @classmethod
    def forward(cls, ctx, x, dim, sizes):
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
        return cat(grads, ctx.dim), None, None


@declare(method=True)
def split(x, split_size_or_sections, dim=0):
    d = _axis(dim, x.ndim)
    n = x.shape[d]
    if isinstance(split_size_or_sections, int):
        if split_size_or_sections <= 0:
            raise ArgumentError(f"split: split_size must be positive, got {split_size_or_sections}")
        sizes = [min(split_size_or_sections, n - i) for i in range(0, n, split_size_or_sections)]
    elif isinstance(split_size_or_sections, Tensor):
        raise TypeError("split(): argument 'split_size_or_sections' must be int or a list of ints, not Tensor")
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise ShapeError(f"split: sections {sizes} do not add up to dimension {d} of size {n}")
    if len(sizes) == 1:
        return (x,)
    if x.ndim > 4:   # one folded slice view each
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        return tuple(slice_view(x, tuple(a if i == d else 0 for i in range(x.ndim)),
                                tuple(a + n if i == d else x.shape[i] for i in range(x.ndim)),
                                view_tracking.MULTI_OUTPUT) for a, n in zip(starts, sizes))
    pieces, start = Split.apply(x, d, tuple(sizes)), 0
    for piece, size in zip(pieces, sizes):   # each piece is a view of x (PyTorch's multi-output views)
        starts, stops = [0] * x.ndim, list(x.shape)
        starts[d], stops[d] = start, start + size
        view_tracking.track(piece, x, SliceStep(x.shape, tuple(starts), tuple(stops)), view_tracking.MULTI_OUTPUT)
        start += size
    return pieces


@declare(method=True)
def chunk(x, chunks, dim=0):
    if not isinstance(chunks, int):
        raise TypeError(f"chunk(): argument 'chunks' (position 2) must be int, not {type(chunks).__name__}")
    if chunks <= 0:
        raise ArgumentError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = x.shape[_axis(dim, x.ndim)]
    size = -(-n // chunks)
    return split(x, size, dim)
