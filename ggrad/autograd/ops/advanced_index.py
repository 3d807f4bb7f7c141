"""Advanced indexing that the view path (indexing.py) and the mask paths leave over, as PyTorch's:
several index tensors or lists in one key (`x[[0, 1], [1, -1]]`, `x[rows, :, cols]`), a Python bool
(`x[True]`), and assignment through integer indices (`x[idx] = v`, `x[i, j] = v`).

PyTorch's advanced indexing is numpy's, so numpy decides the positions: the key, its tensors read on the
host (the result's shape depends on them, as for a mask), indexes an array of x's flat positions. The
values are then one gather (or one scatter for a write) of those positions: gradients reach x and v.
"""

import numbers

import numpy as np

from ..factory import tensor
from ..tensor import Tensor
from ..torch_dtypes import INT64
from . import binary as bi
from . import indexing as ix
from . import mask_index
from . import views as vw


def _is_array(k):
    """An index array: a list or tuple, a numpy array or a Tensor with at least one dim."""
    return isinstance(k, (list, tuple)) or (isinstance(k, np.ndarray) and k.ndim > 0) or (
        isinstance(k, Tensor) and k.ndim > 0)


def find(key, write=False):
    """Whether `key` needs this module: two or more index arrays, a Python bool, an index array of
    several dims beside an integer, or (with `write`) any integer index array."""
    items = key if isinstance(key, tuple) else (key,)
    arrays = [k for k in items if _is_array(k)]
    if any(isinstance(k, bool) for k in items) or len(arrays) > 1:
        return True
    if write:
        return bool(arrays)
    several_dims = any((k.ndim if isinstance(k, Tensor) else np.ndim(k)) > 1 for k in arrays)
    return several_dims and any(isinstance(k, numbers.Integral) for k in items)


def _host_key(key):
    """The key with tensors as numpy arrays, refusing what PyTorch refuses (steps below one)."""
    items = key if isinstance(key, tuple) else (key,)
    out = []
    for k in items:
        if isinstance(k, slice) and k.step is not None and k.step <= 0:
            raise ValueError("step must be greater than zero")
        if isinstance(k, Tensor):
            k = k.item() if k.ndim == 0 and not k.dtype.is_float else k.numpy()
        if isinstance(k, (list, tuple)):
            k = np.asarray(k)
        if isinstance(k, np.ndarray) and k.dtype.kind not in "iub":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        out.append(k)
    return tuple(out)


def positions(x, key):
    """The flat positions of x that x[key] picks, shaped as x[key]."""
    flat = np.arange(x.numel(), dtype=np.int64).reshape(x.shape)
    try:
        return flat[_host_key(key)]
    except IndexError as e:
        raise IndexError(f"index: {e}") from None


def getitem(x, key):
    """x[key]: one gather of the positions numpy's rules give."""
    picked = positions(x, key)
    if picked.ndim == 0:
        picked = picked.reshape(1)
        shape = ()
    else:
        shape = picked.shape
    out = ix.index_select(vw.reshape(x, x.numel()), 0, tensor(picked.reshape(-1), dtype=INT64, device=x.device))
    return vw.reshape(out, shape)


def setitem(x, key, value):
    """x with `value` (broadcast to x[key]'s shape) written at the positions x[key] picks."""
    picked = positions(x, key)
    if not isinstance(value, Tensor):
        value = tensor(value, dtype=x.dtype, device=x.device)
    if value.ndim:
        value = vw.reshape(bi.expand_to(value, bi.broadcast_shapes(value.shape, picked.shape, "index_put_")),
                           picked.size)
    flat = vw.reshape(x, x.numel())
    return vw.reshape(mask_index.put(flat, 1, picked.reshape(-1), value, accumulate=False), x.shape)
