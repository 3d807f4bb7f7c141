"""Movement ops: reshape, permute, slices and padding, and the shape helpers built on them.

Reshape, permute and slices are GGML views (no copy); ops that need contiguous memory copy on demand.
A slice's backward pads the gradient with zeros (`pad_ext`). The public functions return views that
share storage with their input, as PyTorch's: each records a step (how it derives from its input and
how a write into it goes back, see view_tracking.py).
"""

from ...ggml.errors import ShapeError
from .. import dtype_view, view_tracking
from ..recording import alias
from ..tensor import Tensor, _axis
from . import folding
from .broadcast import Expand
from .view_primitives import Contiguous, Permute, Reshape, Slice, SliceScatter, infer_shape, prod
from ..declaration import declare
from ..arguments import DIMS, INT, SHAPE_OR_DTYPE, kinds


def slice_scatter(x, y, starts):
    """x with y written at offset `starts` (y of the block's shape and x's dtype)."""
    if not y.numel():
        return x
    if x.ndim > 4:
        return folding.slice_scatter(x, y, tuple(starts))
    return SliceScatter.apply(x, y, tuple(starts))


class _Step:
    """One view step over an input of shape `in_shape`: `apply(x)` derives the view, `scatter(x, value)`
    is x with `value` written where the view reads it, `geometry` maps PyTorch's (sizes, strides, offset)."""
    __slots__ = ("in_shape",)
    needs_base = False   # scatter reads the input's old value (a slice keeps the rest of it)
    writable = True
    hides_base = False   # the result's `_base` is None, as PyTorch's detach()


class ReshapeStep(_Step):
    __slots__ = ("shape",)

    def __init__(self, in_shape, shape):
        self.in_shape, self.shape = in_shape, shape

    def apply(self, x):
        return Reshape.apply(x, self.shape)

    def scatter(self, x, value):
        return Reshape.apply(value, self.in_shape)

    def geometry(self, sizes, strides, offset):
        return self.shape, view_tracking.view_strides(sizes, strides, self.shape), offset


class PermuteStep(_Step):
    __slots__ = ("perm",)

    def __init__(self, in_shape, perm):
        self.in_shape, self.perm = in_shape, perm

    def apply(self, x):
        return _permuted(x, self.perm)

    def scatter(self, x, value):
        inverse = [0] * len(self.perm)
        for i, p in enumerate(self.perm):
            inverse[p] = i
        return _permuted(value, tuple(inverse))

    def geometry(self, sizes, strides, offset):
        return tuple(sizes[p] for p in self.perm), tuple(strides[p] for p in self.perm), offset


class SliceStep(_Step):
    __slots__ = ("starts", "stops")
    needs_base = True

    def __init__(self, in_shape, starts, stops):
        self.in_shape, self.starts, self.stops = in_shape, starts, stops

    def apply(self, x):
        if x.ndim > 4:
            return folding.slice_(x, self.starts, self.stops)
        return Slice.apply(x, self.starts, self.stops)

    def scatter(self, x, value):
        return slice_scatter(x, value, self.starts)

    def geometry(self, sizes, strides, offset):
        for start, s in zip(self.starts, strides):
            offset += start * s
        return tuple(b - a for a, b in zip(self.starts, self.stops)), strides, offset


class ExpandStep(_Step):
    """Broadcast to `shape` from the input padded with leading 1s to `src`; dimensions broadcast from 1
    have stride 0, so writing into them is PyTorch's overlap error (writable only without any)."""
    __slots__ = ("src", "shape", "writable")

    def __init__(self, in_shape, src, shape):
        self.in_shape, self.src, self.shape = in_shape, src, shape
        self.writable = src == shape

    def apply(self, x):
        if len(self.shape) > 4:
            return folding.expand(x, self.src, self.shape)
        return Expand.apply(Reshape.apply(x, self.src) if self.src != self.in_shape else x, self.shape)

    def scatter(self, x, value):
        return Reshape.apply(value, self.in_shape)

    def geometry(self, sizes, strides, offset):
        lead = len(self.shape) - len(sizes)
        out = [0] * lead
        for d, (n, s) in enumerate(zip(sizes, strides)):
            out.append(0 if n == 1 and self.shape[lead + d] != 1 else s)
        return self.shape, tuple(out), offset


class DetachStep(_Step):
    """detach(): the same values without history; a write through it changes the base's values only."""
    __slots__ = ()
    hides_base = True

    def __init__(self, in_shape):
        self.in_shape = in_shape

    def apply(self, x):
        return alias(x)

    def scatter(self, x, value):
        return value

    def geometry(self, sizes, strides, offset):
        return sizes, strides, offset


def _permuted(x, perm):
    return folding.permute(x, perm) if len(perm) > 4 else Permute.apply(x, perm)


def apply_view(x, step, meta=None):
    """step applied to x, recorded as a view of x's storage."""
    return view_tracking.track(step.apply(x), x, step, meta)


# ---- public functions ----------------------------------------------------------------------------
@declare(method=True)
def reshape(x, *shape):
    """A view where x's strides allow one (as PyTorch's), else a copy."""
    shape = infer_shape(shape, x.numel())
    if shape == x.shape:
        return x
    if not view_tracking.viewable(x, shape):
        return Reshape.apply(x, shape)
    return apply_view(x, ReshapeStep(x.shape, shape))


@kinds(shape=SHAPE_OR_DTYPE)
@declare(function=False, method=True)
def view(x, *shape):
    """A view of x in `shape`: RuntimeError where x's strides do not allow one (PyTorch's rule).
    `x.view(dtype)` reinterprets x's bits as `dtype` (dtype_view.py)."""
    if not shape:
        raise TypeError("view() missing 1 required positional argument: 'shape' (a size or a dtype)")
    if len(shape) == 1 and dtype_view.is_dtype(shape[0]):
        return dtype_view.view_dtype(x, shape[0])
    shape = infer_shape(shape, x.numel(), "view")
    if not view_tracking.viewable(x, shape):
        raise RuntimeError(f"view: view size is not compatible with input tensor's size and stride (at least one "
                           f"dimension spans across two contiguous subspaces); shape {x.shape} to {shape}. Use "
                           ".reshape(...) instead.")
    return apply_view(x, ReshapeStep(x.shape, shape))


@kinds(dims=DIMS)
@declare(method=True)
def permute(x, *dims):
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    n = x.ndim
    dims = tuple([_axis(d, n) for d in dims])
    if sorted(dims) != list(range(n)):
        raise ShapeError(f"permute: dims {dims} are not a permutation of the {x.ndim} dimensions of {x.shape}")
    if dims == tuple(range(n)):
        return x
    return apply_view(x, PermuteStep(x.shape, dims))


@declare(method=True)
def transpose(x, dim0, dim1):
    n = x.ndim
    if n < 2:
        return x
    d0, d1 = _axis(dim0, n), _axis(dim1, n)
    if d0 == d1:
        return x
    perm = list(range(n))
    perm[d0], perm[d1] = d1, d0
    return apply_view(x, PermuteStep(x.shape, tuple(perm)))   # a valid permutation: no checks of permute's


@declare(function=False, method=True)
def detach(x):
    """x's values without history, sharing x's storage (`x.detach().zero_()` zeroes x, as PyTorch)."""
    return apply_view(x, DetachStep(x.shape), view_tracking.DETACHED)


@declare(method=True)
def contiguous(x):
    """x itself when it is contiguous (as PyTorch counts strides, and in GGML's memory), else a copy."""
    if x._node.is_contiguous and (x._view_of is None or view_tracking.tensor_is_contiguous(x)):
        return x
    return Contiguous.apply(x)


@declare(method=True)
def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return reshape(x, 1)
    s, e = _axis(start_dim, x.ndim), _axis(end_dim, x.ndim)
    return reshape(x, x.shape[:s] + (prod(x.shape[s:e + 1]),) + x.shape[e + 1:])


@declare(method=True)
def squeeze(x, dim=None):
    if dim is None:
        return reshape(x, tuple(s for s in x.shape if s != 1))
    if isinstance(dim, Tensor):
        raise TypeError("squeeze(): argument 'dim' must be int or tuple of ints, not Tensor")
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    dims = {_axis(d, x.ndim) for d in dims}
    return reshape(x, tuple(s for i, s in enumerate(x.shape) if not (i in dims and s == 1)))


@declare(method=True)
def unsqueeze(x, dim):
    d = _axis(dim, x.ndim + 1)
    return reshape(x, x.shape[:d] + (1,) + x.shape[d:])


@declare(method=True)
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
    return apply_view(x, ExpandStep(x.shape, src, shape))


@declare(method=True)
def narrow(x, dim, start, length):
    d = _axis(dim, x.ndim)
    size = x.shape[d]
    if not -size <= start <= size:
        raise IndexError(f"narrow: start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    if start < 0:
        start += size
    if length < 0:
        raise ShapeError("narrow(): length must be non-negative.")
    if start + length > size:
        raise ShapeError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({size}).")
    starts = [0] * x.ndim
    stops = list(x.shape)
    starts[d], stops[d] = start, start + length
    return apply_view(x, SliceStep(x.shape, tuple(starts), tuple(stops)))


def slice_view(x, starts, stops, meta=None):
    """x[starts[0]:stops[0], ...] as a view of x."""
    return apply_view(x, SliceStep(x.shape, tuple(starts), tuple(stops)), meta)


@kinds(index=INT)
@declare(method=True)
def select(x, dim, index, meta=None):
    """x[..., index, ...] at dimension `dim`, that dimension removed: a view (PyTorch's select)."""
    if x.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = _axis(dim, x.ndim)
    size = x.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(x.shape)} at dimension {d}")
    index %= size
    starts, stops = [0] * x.ndim, list(x.shape)
    starts[d], stops[d] = index, index + 1
    picked = slice_view(x, starts, stops)
    return apply_view(picked, ReshapeStep(picked.shape, x.shape[:d] + x.shape[d + 1:]), meta)


@declare(method=True)
def unbind(x, dim=0):
    """The slices of x along `dim`, each a view with the dimension removed (PyTorch's unbind)."""
    d = _axis(dim, x.ndim)
    return tuple(select(x, d, i, view_tracking.MULTI_OUTPUT) for i in range(x.shape[d]))
