"""`scatter_reduce` (PyTorch's torch.scatter_reduce): src reduced into input at index along dim by "sum", "prod",
"mean", "amax" or "amin", with or without input's own values (`include_self`).

Every source element is compared with every target position along `dim` (a mask of index's shape times the
target dim's length), and the reduction runs over the sources of each target: so the gradient of each
reduction is its own (an amax's goes to the maxima, a prod's through cumprod), and positions no index names
keep input's value. Memory grows as the number of source elements times the length of the target dim.
"""

import math

import numpy as np

from ..arguments import TENSOR, require
from ..factory import arange, tensor
from ..tensor import _axis
from . import logical, reduce as reductions
from .selection import where
from .extrema import maximum, minimum
from .scan import cumprod
from .shape_ops import pad
from ..declaration import declare

_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _box(input, extents, d):
    """input restricted to [0, extent) in every dim but d (every dim for d = -1)."""
    for k, extent in enumerate(extents):
        if k != d and extent < input.shape[k]:
            input = input.narrow(k, 0, extent)
    return input


@declare(method=True)
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):  # noqa: A002 (PyTorch's names)
    """input with src[i] reduced into position index[i] along dim (PyTorch's Tensor.scatter_reduce)."""
    how = reduce
    for name, value in (("input", input), ("index", index), ("src", src)):
        require("scatter_reduce", name, value, TENSOR)
    if how not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {how}")
    if index.dtype.is_float:
        raise RuntimeError("scatter_reduce(): Expected dtype int64 for index")
    if src.dtype != input.dtype:
        raise RuntimeError(f"scatter_reduce(): Expected self.dtype to be equal to src.dtype, got {input.dtype!r} and "
                           f"{src.dtype!r}")
    d = _axis(dim, max(input.ndim, 1))
    if not (index.ndim == src.ndim == input.ndim) or any(
            index.shape[k] > src.shape[k] or (k != d and index.shape[k] > input.shape[k]) for k in range(index.ndim)):
        raise RuntimeError(f"scatter_reduce(): index {tuple(index.shape)} must not be larger than src "
                           f"{tuple(src.shape)}, nor than input {tuple(input.shape)} outside dim {d}")
    if index.numel() == 0:
        return input * 1
    targets = input.shape[d]
    values = _box(src, index.shape, -1)                                    # src where index reaches
    region = _box(input, index.shape, d).movedim(d, -1)                   # (..., targets)
    if not input.dtype.is_float:
        values, region = values.float(), region.float()
    idx, vals = index.movedim(d, -1).unsqueeze(-1), values.movedim(d, -1).unsqueeze(-1)
    hits = logical.eq(idx, arange(targets, device=input.device))       # (..., sources, targets)
    written = logical.any(hits, -2)
    if how in ("sum", "mean"):
        total = reductions.sum(where(hits, vals, 0.0), -2)
        count = reductions.sum(hits.float(), -2)
        if how == "sum":
            out = region + total if include_self else where(written, total, region)
        elif include_self:
            out = (region + total) / (count + 1.0)
        else:
            out = where(written, total / maximum(count, tensor(1.0, device=input.device)), region)
    elif how == "prod":
        product = cumprod(where(hits, vals, 1.0), -2).narrow(-2, hits.shape[-2] - 1, 1).squeeze(-2)
        out = region * product if include_self else where(written, product, region)
    else:
        fill = -math.inf if how == "amax" else math.inf
        best = (reductions.amax if how == "amax" else reductions.amin)(where(hits, vals, fill), -2)
        if include_self:
            best = (maximum if how == "amax" else minimum)(best, region)
        out = where(written, best, region)
    out = out.movedim(-1, d)
    if not input.dtype.is_float:   # computed in float32; an integer mean is floored, as PyTorch's
        out = (out.floor() if how == "mean" else out).to(input.dtype)
    if tuple(out.shape) == tuple(input.shape):
        return out
    widths = [0] * (2 * input.ndim)                                        # pad the box back to input's shape
    for k in range(input.ndim):
        widths[2 * (input.ndim - 1 - k) + 1] = input.shape[k] - out.shape[k]
    inside = np.zeros(input.shape, bool)
    inside[tuple(slice(0, s) for s in out.shape)] = True
    return where(tensor(inside, device=input.device), pad(out, tuple(widths)), input)
