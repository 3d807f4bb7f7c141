"""A bool mask anywhere in an index, `x[:, mask]`, `x[..., mask]`, `x[1:, mask] = v`, as PyTorch's.

The mask's dims are moved to the front (a permute), masked there by mask_index (the first-position
case), and the picked dim moved back to where the mask stood: PyTorch puts the result of a lone
advanced index at its own position. The other entries may be slices, `...` and None-free; slices that
select less than a whole dim are applied first (a view) and, for a write, scattered back.
A uint8 tensor stands for a bool mask, as PyTorch's deprecated form (with its warning).
"""

import warnings

import numpy as np

from ..tensor import Tensor
from ..torch_dtypes import BOOL, UINT8
from . import binary as bi
from . import indexing as ix
from . import mask_index
from . import views as vw


def _is_mask(k):
    return (isinstance(k, Tensor) and k.dtype in (BOOL, UINT8)) or (isinstance(k, np.ndarray) and k.dtype == bool)


def _as_bool(mask):
    if isinstance(mask, Tensor) and mask.dtype is UINT8:
        warnings.warn("indexing with dtype ggrad.uint8 is now deprecated, please use a dtype ggrad.bool instead.",
                      UserWarning, stacklevel=4)
        return mask != 0
    return mask


def find(key):
    """Whether `key` is a mask alone or a tuple of one mask among slices and `...`."""
    items = key if isinstance(key, tuple) else (key,)
    masks = [k for k in items if _is_mask(k)]
    return len(masks) == 1 and all(_is_mask(k) or isinstance(k, slice) or k is Ellipsis for k in items)


def _layout(x, key):
    """(mask, d, basic): the mask (as bool), the first dim it covers, and the key with the mask's dims
    as whole slices (None when every entry selects whole dims)."""
    items = key if isinstance(key, tuple) else (key,)
    if sum(k is Ellipsis for k in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    mask = next(k for k in items if _is_mask(k))
    k = mask.ndim
    used = len(items) - 1 - any(item is Ellipsis for item in items) + k
    if used > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    expanded = []
    for item in items:
        if item is Ellipsis:
            expanded += [slice(None)] * (x.ndim - used)
        elif item is mask:
            d = len(expanded)
            expanded += [slice(None)] * k
        else:
            expanded.append(item)
    whole = all(s == slice(None) or s.indices(n) == (0, n, 1) for s, n in zip(expanded, x.shape))
    return _as_bool(mask), d, None if whole else tuple(expanded)


def _to_front(x, d, k):
    """x with dims d..d+k first (the rest in order), and the permutation's inverse."""
    perm = list(range(d, d + k)) + [i for i in range(x.ndim) if not d <= i < d + k]
    inverse = [perm.index(i) for i in range(x.ndim)]
    return vw.permute(x, *perm), inverse


def _count_to(out, d):
    """out (count, rest...) with its count dim moved to position d."""
    order = list(range(1, d + 1)) + [0] + list(range(d + 1, out.ndim))
    return vw.permute(out, *order)


def getitem(x, key):
    mask, d, basic = _layout(x, key)
    sub = x if basic is None else ix.getitem(x, basic)
    front, _ = _to_front(sub, d, mask.ndim)
    return _count_to(mask_index.getitem(front, mask), d)


def setitem(x, key, value):
    """x with `value` (broadcast to the shape x[key] has) written where the mask is True."""
    mask, d, basic = _layout(x, key)
    sub = x if basic is None else ix.getitem(x, basic)
    front, inverse = _to_front(sub, d, mask.ndim)
    if isinstance(value, Tensor) and value.ndim:
        count = int(np.count_nonzero(mask.numpy() if isinstance(mask, Tensor) else mask))
        rest = front.shape[mask.ndim:]
        shape = rest[:d] + (count,) + rest[d:]
        value = bi.expand_to(value, bi.broadcast_shapes(value.shape, shape, "index_put_"))
        value = vw.permute(value, *([d] + [i for i in range(len(shape)) if i != d]))
    written = vw.permute(mask_index.setitem(front, mask, value), *inverse)
    return written if basic is None else ix.setitem(x, basic, written)
