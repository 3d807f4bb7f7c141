"""Indexing: rows picked by integer indices (get_rows and its backward), index_select, embedding,
gather, and `x[key]` / `x[key] = value` with integers, slices, None, Ellipsis and index tensors."""

import numpy as np

from ...ggml import f32, i32, ops
from ...ggml.errors import DTypeError, IndexOutOfRangeError, ShapeError
from .. import device_locks, memory, view_tracking
from ..recording import alias
from ..memory import graph_of
from ..arguments import as_int
from ..primitive import Primitive
from ..tensor import Tensor, _axis
from ..torch_dtypes import SMALL_INTS
from ..factory import arange, tensor
from . import host_index
from . import reduce as rd
from . import unary as un
from . import views as vw
from .view_primitives import Reshape, Slice, prod
from .joins import cat
from ..declaration import declare


class GetRows(Primitive):
    """Rows of a 2-D `x` picked by int32 `index` (GGML get_rows); backward is get_rows_back."""

    @staticmethod
    def build(ctx, graph, x, index):
        return ops.get_rows(graph.ctx, x, index)

    saves = (1,)   # backward reads the second argument only

    @staticmethod
    def shape(x, index):
        return (index.shape[0], x.shape[1])

    @staticmethod
    def result_dtype(x, index):
        return x.dtype if x.dtype.is_float else f32

    @staticmethod
    def backward(ctx, g):
        index, = ctx.saved_tensors
        return GetRowsBack.apply(g, index, ctx.shapes[0]), None


class GetRowsBack(Primitive):
    """The gradient of GetRows: rows of g added into zeros of `shape` at `index` (GGML get_rows_back)."""

    @staticmethod
    def build(ctx, graph, g, index, shape):
        return ops.get_rows_back(graph.ctx, g, index, graph.shape_only(shape))

    @staticmethod
    def shape(g, index, shape):
        return shape

    @staticmethod
    def result_dtype(g, index, shape):
        return f32

    saves = (1,)

    @staticmethod
    def backward(ctx, gg):   # linear in g: its gradient is the adjoint, get_rows itself
        index, = ctx.saved_tensors
        return GetRows.apply(gg, index), None, None


def known_values(t):
    """The values of Tensor `t` if they are at hand without a device round trip (host data still to be
    uploaded, or memory of the CPU backend) and not hidden (host_index.hide_values), else None."""
    if host_index.is_hidden(t):
        return None
    if t._pending is not None:
        memory.stats.host_reads += 1
        return t._pending.host_value(t)
    return t.numpy() if t.device.is_cpu else None


def check_values(values, count, message):
    """RuntimeError(message) when count(values) > 0: at once for host values, else by the compute."""
    host = known_values(values)
    if host is not None:
        if np.isnan(host).any() or float(count(tensor(host.astype(np.float32))).item()) > 0:
            raise RuntimeError(message)
        return
    with device_locks.lock_of(values.device):
        graph_of(values).check(count(values), RuntimeError(message))


def count_outside(values, lo, hi, allowed=None):
    """A 0-d float Tensor: how many of the float Tensor `values` lie outside [lo, hi] (and are not `allowed`)."""
    below = un.Step.apply(lo - values)
    above = un.Step.apply(values - hi)
    outside = below + above
    if allowed is not None:
        outside = outside * un.Step.apply(un.abs(values - float(allowed)))
    return rd.SumAll.apply(outside)


def checked_index(index, size, device, op, dim=0, wrap=False):
    """`index` as an int32 Tensor of positions in [0, size) along `dim`: IndexError otherwise, as PyTorch.
    With `wrap` (advanced indexing, `x[[-1]]`), negative indices count from the end.

    Host data is checked at once; values computed on the device are clamped into range for GGML (whose
    kernels assert) and counted, and the graph's compute raises the IndexError when any was outside; an
    input of a replayed step whose owner checks it on the host (host_index.hide_values) is used as it is.
    """
    if not isinstance(index, Tensor):
        array = np.asarray(index)
        if array.size and array.dtype.kind not in "iu":
            raise _not_integer(op, f"numpy dtype {array.dtype}", wrap)
        array = _checked_host(array.astype(np.int64), size, op, dim, wrap)
        return tensor(array.astype(np.int32), dtype=i32, device=device)
    if index.dtype.is_float or index.dtype in SMALL_INTS:   # PyTorch indexes with long and int only
        raise _not_integer(op, index.dtype.torch_name if index.dtype in SMALL_INTS else index.dtype.name, wrap)
    index = index if index.dtype is i32 else index.to(i32)
    bounds = host_index.index_bounds(index)
    if bounds is not None and not wrap:   # a replayed step's input, checked by its owner at every call
        bounds.append(size)
        return index
    values = known_values(index)
    if values is not None:
        wrapped = _checked_host(values.astype(np.int64), size, op, dim, wrap)
        if wrap and (values < 0).any():
            return tensor(wrapped.astype(np.int32), device=device)
        return index
    with device_locks.lock_of(index.device):   # the count, the clamp and the check go into one pending graph
        as_float = index.to(f32)
        if wrap:
            as_float = as_float + un.Step.apply(-as_float) * float(size)
        error = IndexOutOfRangeError(f"{op}: an index computed on the device is out of bounds for dimension {dim} "
                                     f"with size {size}")
        graph_of(index).check(count_outside(as_float, 0.0, size - 1.0), error)
        return un.Clamp.apply(as_float, 0.0, size - 1.0).to(i32)


def check_labels(target, classes, ignore_index, op):
    """Class-index targets in [0, classes) or equal to ignore_index: IndexError otherwise, as PyTorch
    (checked at once for host data, by the graph's compute for values computed on the device)."""
    values = known_values(target)
    if values is not None:
        bad = values[((values < 0) | (values >= classes)) & (values != ignore_index)]
        if bad.size:
            raise IndexError(f"{op}: Target {bad.flat[0]} is out of bounds (classes: {classes})")
        return
    with device_locks.lock_of(target.device):
        graph_of(target).check(count_outside(target.to(f32), 0.0, classes - 1.0, allowed=ignore_index),
                               IndexError(f"{op}: a target computed on the device is out of bounds "
                                          f"(classes: {classes}, ignore_index: {ignore_index})"))


def _not_integer(op, got, advanced):
    """PyTorch raises IndexError for a float index in `x[...]`, a type error in index_select/embedding."""
    message = f"{op}: indices must be an integer tensor (long, int), got {got}"
    return IndexError(message) if advanced else DTypeError(message)


def _checked_host(values, size, op, dim, wrap):
    """Host index values in [0, size) (negative ones wrapped first with `wrap`), else IndexError."""
    if not values.size:
        return values
    lo = -size if wrap else 0
    smallest, largest = values.min(), values.max()
    if smallest < lo or largest >= size:
        bad = largest if largest >= size else smallest
        raise IndexOutOfRangeError(f"{op}: index {bad} is out of bounds for dimension {dim} with size {size}")
    return np.where(values < 0, values + size, values) if wrap and smallest < 0 else values


@declare(method=True)
def index_select(x, dim, index):
    """Entries of x along `dim` at the positions in the 1-D integer `index`."""
    d = _axis(dim, x.ndim)
    index = checked_index(index, x.shape[d] if x.ndim else 1, x.device, "index_select", d)
    if index.ndim != 1:
        raise ShapeError(f"index_select: index must be 1-D, got shape {index.shape}")
    moved = x if d == 0 else vw.transpose(x, 0, d)
    rows = vw.reshape(moved, moved.shape[0], -1) if moved.ndim != 2 else moved
    picked = GetRows.apply(rows, index)
    out = vw.reshape(picked, (index.shape[0],) + moved.shape[1:])
    out = out if d == 0 else vw.transpose(out, 0, d)
    return out if out.dtype is x.dtype else out.to(x.dtype)


@declare()
def embedding(index, weight):
    """Rows of `weight` for every entry of the integer tensor `index` (shape index.shape + (dim,))."""
    index = checked_index(index, weight.shape[0], weight.device, "embedding")
    flat = vw.reshape(index, index.numel())
    out = GetRows.apply(weight, flat)
    return vw.reshape(out, index.shape + (weight.shape[1],))


@declare(method=True)
def gather(x, dim, index):
    """out[..., j] = x[..., index[..., j]] along the last dimension (dim must be -1 / last)."""
    d = _axis(dim, x.ndim)
    index = checked_index(index, x.shape[d], x.device, "gather", d)
    if d != x.ndim - 1:
        moved = vw.transpose(gather(vw.transpose(x, d, -1), -1, vw.transpose(index, d, -1)), d, -1)
        return moved
    if index.ndim != x.ndim or any(i > s for i, s in zip(index.shape[:-1], x.shape[:-1])):
        raise ShapeError(f"gather: index shape {index.shape} must have input {x.shape}'s dimensions, none larger "
                         f"except in dimension {d}")
    if index.shape[:-1] != x.shape[:-1]:   # a smaller index reads the input's leading corner, as PyTorch
        x = x[tuple(slice(0, size) for size in index.shape[:-1])]
    rows = prod(x.shape[:-1])
    n, k = x.shape[-1], index.shape[-1]
    base = vw.reshape(arange(rows, device=x.device) * n, rows, 1)
    flat_index = vw.reshape(vw.reshape(index.to(f32), rows, k) + base.to(f32), rows * k).to(i32)
    picked = GetRows.apply(vw.reshape(x, rows * n, 1), flat_index)
    return vw.reshape(picked, index.shape).to(x.dtype) if x.dtype is not f32 else vw.reshape(picked, index.shape)


def _expand_key(key, ndim):
    """The key as a list with Ellipsis replaced by full slices."""
    if not isinstance(key, tuple):
        key = (key,)
    n_ellipsis = sum(k is Ellipsis for k in key)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(k is not None and k is not Ellipsis for k in key)
    if used > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    out = []
    for k in key:
        if k is Ellipsis:
            out.extend([slice(None)] * (ndim - used))
        else:
            out.append(k)
    return out


@declare()
def getitem(x, key):
    picked = host_index.rows(x, key)   # host memory and host indices: numpy gathers, no graph
    if picked is not None:
        return picked
    key = _expand_key(key, x.ndim)
    starts, stops, drop, strided, tensors, new_axes = [], [], [], [], [], []
    dim = 0
    for k in key:
        if k is None:
            new_axes.append(len(starts) + len(new_axes))
            continue
        if dim >= x.ndim:
            raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
        size = x.shape[dim]
        if isinstance(k, Tensor) and k.ndim == 0 and not k.dtype.is_float:
            k = int(k)
        if isinstance(k, bool):
            raise IndexError("boolean indices are not supported; use masked_fill or where")
        array = isinstance(k, np.ndarray) and k.ndim > 0   # an index array, as PyTorch takes it
        if isinstance(k, int) or (hasattr(k, "__index__") and not isinstance(k, (slice, Tensor)) and not array):
            i = int(k)
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")
            i %= size
            starts.append(i)
            stops.append(i + 1)
            drop.append(dim)
        elif isinstance(k, slice):
            start, stop, stride = k.indices(size)
            if stride <= 0:
                raise ValueError("step must be greater than zero")
            stop = max(stop, start)
            starts.append(start)
            stops.append(stop)
            if stride != 1:
                strided.append((dim, stride, start, stop))
        elif isinstance(k, Tensor) or isinstance(k, (list, tuple)) or array:
            tensors.append((dim, k))
            starts.append(0)
            stops.append(size)
        elif isinstance(k, float):
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte tensors are valid "
                             f"indices (got float {k})")
        else:
            raise TypeError(f"unsupported index type {type(k).__name__}")
        dim += 1
    while dim < x.ndim:
        starts.append(0)
        stops.append(x.shape[dim])
        dim += 1

    out = x
    if tuple(starts) != (0,) * x.ndim or tuple(stops) != x.shape:
        out = vw.slice_view(x, starts, stops)
    for d, stride, start, stop in strided:
        out = vw.apply_view(out, StridedStep(out.shape, d, stride))
    if len(tensors) > 1:
        raise IndexError("indexing with more than one index tensor is not supported; use gather")
    if tensors and drop and getattr(tensors[0][1], "ndim", 1) != 1:
        raise IndexError("a multi-dimensional index tensor cannot be combined with integer indices")
    for d, index in tensors:
        out = _select_tensor(out, d, index)
    shape = list(out.shape)
    index_dims = {d: None for d, _ in tensors}
    kept = []
    for i, s in enumerate(shape):
        if i in drop and i not in index_dims:
            continue
        kept.append(s)
    for pos in new_axes:
        kept.insert(pos, 1)
    kept = tuple(kept)
    if out is x:   # x[:], x[...], x[None]: still a new view, as PyTorch's
        return vw.view(x, kept)
    return out if kept == out.shape else vw.reshape(out, kept)


def _select_tensor(x, d, index):
    index = checked_index(index, x.shape[d], x.device, "index", d, wrap=True)
    if index.ndim != 1:
        flat = vw.reshape(index, index.numel())
        picked = index_select(x, d, flat)
        shape = x.shape[:d] + index.shape + x.shape[d + 1:]
        return vw.reshape(picked, shape)
    return index_select(x, d, index)


def _replaced(x, dim, positions, value):
    """x with its entries at host `positions` along `dim` taken from `value` (in order): one get_rows of
    the two joined, so gradients reach both."""
    size = x.shape[dim]
    source = np.arange(size)
    source[positions] = size + np.arange(len(positions))
    return index_select(cat([x, value], dim), dim, source)


class StridedStep:
    """A view step: every `step`-th entry along `dim`, from the first (a strided slice, after its bounds
    were sliced). Read with get_rows; written back by `_replaced`."""
    __slots__ = ("in_shape", "dim", "step", "count")
    needs_base = True
    writable = True
    hides_base = False

    def __init__(self, in_shape, dim, step):
        self.in_shape, self.dim, self.step = in_shape, dim, step
        self.count = len(range(0, in_shape[dim], step))

    def apply(self, x):
        return index_select(x, self.dim, np.arange(0, self.count * self.step, self.step))

    def scatter(self, x, value):
        return _replaced(x, self.dim, np.arange(0, self.count * self.step, self.step), value)

    def geometry(self, sizes, strides, offset):
        sizes, strides = list(sizes), list(strides)
        sizes[self.dim] = self.count
        strides[self.dim] *= self.step
        return tuple(sizes), tuple(strides), offset


class DiagonalStep:
    """A view step: the `offset`-th diagonal of the last two dimensions (n, m), as one last dimension.
    Read and written on the two merged: entries start + i * (m + 1)."""
    __slots__ = ("in_shape", "offset", "count", "start")
    needs_base = True
    writable = True
    hides_base = False

    def __init__(self, in_shape, offset):
        n, m = in_shape[-2:]
        self.in_shape, self.offset = in_shape, offset
        self.count = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
        self.start = offset if offset >= 0 else -offset * m

    def _flat(self, x):
        n, m = self.in_shape[-2:]
        return Reshape.apply(x, self.in_shape[:-2] + (n * m,))

    def _positions(self):
        return self.start + np.arange(self.count) * (self.in_shape[-1] + 1)

    def apply(self, x):
        flat = self._flat(x)
        if not self.count:
            return Slice.apply(flat, (0,) * flat.ndim, flat.shape[:-1] + (0,))
        return index_select(flat, -1, self._positions())

    def scatter(self, x, value):
        if not self.count:
            return x
        return Reshape.apply(_replaced(self._flat(x), x.ndim - 2, self._positions(), value), self.in_shape)

    def geometry(self, sizes, strides, offset):
        row, col = (0, self.offset) if self.offset >= 0 else (-self.offset, 0)
        if self.count:   # an empty diagonal stays at its input's offset, as PyTorch's
            offset += row * strides[-2] + col * strides[-1]
        return sizes[:-2] + (self.count,), strides[:-2] + (strides[-2] + strides[-1],), offset


@declare(method=True)
def diagonal(x, offset=0, dim1=0, dim2=1):
    """The diagonal of the (dim1, dim2) planes, as a last dimension: a view of x (PyTorch's diagonal)."""
    offset = as_int(offset, "offset", "diagonal")
    d1, d2 = _axis(dim1, x.ndim), _axis(dim2, x.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal: dim1 and dim2 cannot be the same dimension, got {dim1} and {dim2}")
    moved = vw.permute(x, [d for d in range(x.ndim) if d not in (d1, d2)] + [d1, d2])
    return vw.apply_view(moved, DiagonalStep(moved.shape, int(offset)))


@declare()
def setitem(x, key, value):
    """x with `value` written into x[key] (integers, slices of any positive step, None, Ellipsis), as a
    new tensor: written back through the steps of the view x[key] (a slice-scatter where the slice has
    unit steps), so gradients reach both x and value. `x[key] = value` rebinds x to it."""
    for k in key if isinstance(key, tuple) else (key,):
        if isinstance(k, (list, tuple, np.ndarray)) or (isinstance(k, Tensor) and (k.ndim or k.dtype.is_float)):
            raise IndexError(f"assignment with an index of type {type(k).__name__} is not supported; "
                             "use index_put_ or masked_fill")
    region = getitem(alias(x), key)   # a view of x's values, its steps from x (validates the key)
    if not isinstance(value, Tensor):
        value = tensor(value, dtype=x.dtype if x.dtype.is_float else None, device=x.device)
    value = vw.expand(vw.reshape(value, _broadcastable(value, region.shape)), region.shape)
    return view_tracking.write_back(x, region._view_of.steps, value.to(x.dtype))


def _broadcastable(value, shape):
    if value.ndim > len(shape):
        squeezed = tuple(s for s in value.shape if s != 1)
        return (1,) * (len(shape) - len(squeezed)) + squeezed
    return value.shape
