"""Boolean-mask indexing `x[mask]`, `x[mask] = v`, and `index_put_`, as PyTorch's.

Which elements a mask picks decides the result's shape, so the mask (or the index tensors) is read on
the host, as PyTorch synchronises for it; the values stay on the device and gradients reach x and v.
"""

import numpy as np

from ..factory import tensor
from ..tensor import Tensor
from ..torch_dtypes import BOOL, INT64
from . import binary as bi
from .selection import where
from . import indexing as ix
from . import scatter_ops as sc
from . import views as vw
from ..declaration import declare


def bool_lists_as_masks(key):
    """The key with each list of Python bools as a numpy bool mask: PyTorch reads `x[[True, False]]` as one."""
    def one(k):
        if isinstance(k, list) and k and all(isinstance(v, bool) for v in k):
            return np.array(k, dtype=bool)
        return k
    return tuple(one(k) for k in key) if isinstance(key, tuple) else one(key)


def is_mask(key):
    """Whether `key` is a bool mask (a bool Tensor or numpy bool array, alone or as a 1-tuple)."""
    if isinstance(key, tuple) and len(key) == 1:
        key = key[0]
    return (isinstance(key, Tensor) and key.dtype is BOOL) or (isinstance(key, np.ndarray) and key.dtype == bool)


def _host_mask(x, key):
    mask = key[0] if isinstance(key, tuple) else key
    values = mask.numpy() if isinstance(mask, Tensor) else np.asarray(mask)
    k = values.ndim
    if values.shape != x.shape[:k]:
        raise IndexError(f"The shape of the mask {list(values.shape)} does not match the shape of the indexed "
                         f"tensor {list(x.shape[:k])}")
    return values, k


def _rows(x, k):
    """x as (rows, rest): its first k dims flattened into rows (rest 1 when k covers every dim)."""
    rows = int(np.prod(x.shape[:k], dtype=np.int64))
    return vw.reshape(x, rows, max(1, int(np.prod(x.shape[k:], dtype=np.int64)))), x.shape[k:]


def getitem(x, key):
    """x[mask]: the rows where mask is True, shape (count,) + x.shape[mask.ndim:]."""
    values, k = _host_mask(x, key)
    picked = np.flatnonzero(values)
    rows, rest = _rows(x, k)
    out = ix.index_select(rows, 0, tensor(picked, dtype=INT64, device=x.device))
    return vw.reshape(out, (len(picked),) + rest)


def setitem(x, key, value):
    """x with `value` written where mask is True: a number or 0-d tensor everywhere there, or a tensor
    broadcastable to (count,) + rest, one row per True element in order."""
    values, k = _host_mask(x, key)
    return put(x, k, np.flatnonzero(values), value, accumulate=False)


def put(x, k, flat, value, accumulate):
    """x with `value` rows written (or added) at the flat row positions `flat` of x's first k dims."""
    rows, rest = _rows(x, k)
    n = len(flat)
    if not isinstance(value, Tensor):
        value = tensor(value, dtype=x.dtype, device=x.device)
    value = value.to(x.dtype)
    value = vw.reshape(bi.expand_to(value, bi.broadcast_shapes(value.shape, (n,) + rest, "index_put_")
                                    if value.ndim else (n,) + rest), n, rows.shape[1]) if n else None
    if n == 0:
        return x
    index = tensor(flat, dtype=INT64, device=x.device)
    if accumulate:
        out = sc.index_add(rows, 0, index, value)
    else:
        source = np.zeros(rows.shape[0], dtype=np.int64)
        source[flat] = np.arange(n)   # the last write to a row wins
        hit = np.zeros(rows.shape[0], dtype=bool)
        hit[flat] = True
        spread = ix.index_select(value, 0, tensor(source, dtype=INT64, device=x.device))
        out = where(tensor(hit.reshape(-1, 1), device=x.device), spread, rows)
    return vw.reshape(out, x.shape)


@declare(function=False, method=True)
def index_put(x, indices, values, accumulate=False):
    """x with `values` put at `indices` (a tuple of integer index tensors for the leading dims, broadcast
    together, or one bool mask); `accumulate` adds instead, duplicates included."""
    if not isinstance(indices, tuple):
        raise TypeError(f"index_put_: indices must be a tuple of tensors, got {type(indices).__name__}")
    if is_mask(indices):
        return setitem(x, indices, values) if not accumulate else put(x, *_mask_flat(x, indices), values, True)
    k = len(indices)
    if k > x.ndim:
        raise IndexError(f"index_put_: too many indices ({k}) for tensor of dimension {x.ndim}")
    host = np.broadcast_arrays(*[np.asarray(i.numpy() if isinstance(i, Tensor) else i) for i in indices])
    flat = np.zeros(host[0].shape, dtype=np.int64)
    for d, idx in enumerate(host):
        if idx.dtype.kind not in "iu":
            raise IndexError("index_put_: tensors used as indices must be long, int or bool tensors")
        size = x.shape[d]
        if idx.size and (idx.min() < -size or idx.max() >= size):
            raise IndexError(f"index_put_: index out of bounds for dimension {d} with size {size}")
        flat = flat * size + idx % size
    return put(x, k, flat.reshape(-1), _flat_values(values, host[0].shape, x.shape[k:]), accumulate)


def _mask_flat(x, key):
    values, k = _host_mask(x, key)
    return k, np.flatnonzero(values)


def _flat_values(values, index_shape, rest):
    """values broadcast to index_shape + rest, then with the index dims as one."""
    if not isinstance(values, Tensor) or values.ndim == 0:
        return values
    full = bi.broadcast_shapes(values.shape, tuple(index_shape) + tuple(rest), "index_put_")
    return vw.reshape(bi.expand_to(values, full), (int(np.prod(index_shape, dtype=np.int64)),) + tuple(rest))


@declare()
def masked_select(x, mask):
    """The entries of x where mask is True, as a 1-D tensor; x and mask broadcast together, as PyTorch."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"masked_select(): mask must be a bool Tensor, got {type(mask).__name__}")
    if mask.dtype is not BOOL:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, got {mask.dtype.name}")
    shape = bi.broadcast_shapes(x.shape, mask.shape, "masked_select")
    return getitem(vw.expand(x, shape), vw.expand(mask, shape))
