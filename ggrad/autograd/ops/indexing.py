"""`x[key]`: integers, unit-step and strided slices, None, Ellipsis and integer index tensors."""

from ...ggml.errors import ShapeError
from . import movement as mv
from ..tensor import Tensor
from ..factory import arange, ones, tensor


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


def getitem(x, key):
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
        if isinstance(k, int) or (hasattr(k, "__index__") and not isinstance(k, (slice, Tensor))):
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
        elif isinstance(k, Tensor) or isinstance(k, (list, tuple)):
            tensors.append((dim, k))
            starts.append(0)
            stops.append(size)
        else:
            raise TypeError(f"unsupported index type {type(k).__name__}")
        dim += 1
    while dim < x.ndim:
        starts.append(0)
        stops.append(x.shape[dim])
        dim += 1

    out = x
    if tuple(starts) != (0,) * x.ndim or tuple(stops) != x.shape:
        out = mv.Slice.apply(x, tuple(starts), tuple(stops))
    for d, stride, start, stop in strided:
        count = len(range(0, stop - start, stride))
        out = mv.index_select(out, d, arange(0, count * stride, stride, device=x.device))
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
    return out if kept == out.shape else mv.reshape(out, kept)


def _select_tensor(x, d, index):
    index = mv._index_tensor(index, x.device, "indexing")
    if index.ndim != 1:
        flat = mv.reshape(index, index.numel())
        picked = mv.index_select(x, d, flat)
        shape = x.shape[:d] + index.shape + x.shape[d + 1:]
        if len(shape) > 4:
            raise ShapeError(f"indexing: result shape {shape} has more than 4 dimensions")
        return mv.reshape(picked, shape)
    return mv.index_select(x, d, index)


def setitem(x, key, value):
    """x with `value` written into x[key] (integers and unit-step slices), as a new tensor.

    Built as x * (1 - mask) + padded value, so gradients reach both x and value.
    """
    region = getitem(x.detach(), key)   # validates the key; its shape is the region's
    if not isinstance(value, Tensor):
        value = tensor(value, dtype=x.dtype if x.dtype.is_float else None, device=x.device)
    starts, stops = _region_bounds(x, key)
    shape = tuple(b - a for a, b in zip(starts, stops))
    value = mv.expand(mv.reshape(value, _broadcastable(value, region.shape)), region.shape)
    value = mv.reshape(value, shape)
    pads = []
    for d in range(len(shape)):
        pads.append((starts[d], x.shape[d] - stops[d]))
    placed = _pad(value, pads)
    mask = _pad(ones(shape, device=x.device), pads)
    out = x * (1.0 - mask) + placed
    return out if out.dtype is x.dtype else out.to(x.dtype)


def _broadcastable(value, shape):
    if value.ndim > len(shape):
        squeezed = tuple(s for s in value.shape if s != 1)
        return (1,) * (len(shape) - len(squeezed)) + squeezed
    return value.shape


def _region_bounds(x, key):
    key = _expand_key(key, x.ndim)
    starts, stops, dim = [], [], 0
    for k in key:
        if k is None:
            continue
        size = x.shape[dim]
        if isinstance(k, slice):
            start, stop, stride = k.indices(size)
            if stride != 1:
                raise IndexError("assignment through a strided slice is not supported")
            starts.append(start)
            stops.append(max(stop, start))
        elif isinstance(k, int):
            i = k % size
            starts.append(i)
            stops.append(i + 1)
        else:
            raise IndexError(f"assignment with an index of type {type(k).__name__} is not supported; "
                             "use masked_fill or where")
        dim += 1
    for d in range(dim, x.ndim):
        starts.append(0)
        stops.append(x.shape[d])
    return starts, stops


def _pad(t, pads):
    starts = tuple(p[0] for p in pads)
    full = tuple(s + a + b for s, (a, b) in zip(t.shape, pads))
    return mv.PadTo.apply(t, starts, full)
