"""PyTorch's order statistics and counts, composed from sort, gather, comparisons and sums: std_mean, var_mean,
median, nanmedian, quantile, nanquantile, cummax, cummin, histc, bincount.

Values picked out of the input (medians, quantiles, running extremes) are gathered from it, so their gradient
goes to the elements picked, as PyTorch's does. cummax and cummin compare every position with every earlier
one (memory grows as the square of the dim's length); histc compares every element with every bin.
"""

import builtins
import math

import numpy as np

from ...ggml.errors import ShapeError
from ..arguments import ArgumentTypeError, FLAG, INT, NUMBER, TENSOR, require
from ..factory import arange, tensor, zeros
from ..grad_mode import no_grad
from ..tensor import Tensor, _axis
from ..torch_dtypes import INT64
from . import logical, reduce as rd
from .selection import where
from .indexing import gather
from .joins import stack
from .math import isnan
from .scatter_ops import scatter_add
from .sorting import sort
from ..declaration import declare

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")
_WHOLE = object()   # median's "no dim given" (PyTorch refuses an explicit None)


def _scalar_name(t):
    """PyTorch's scalar-type name of t's dtype ("Float", "Long"), as its kernels' messages use it."""
    return t.type().removeprefix("ggrad.").removesuffix("Tensor")


@declare()
def var_mean(input, dim=None, *, correction=1, keepdim=False):  # noqa: A002 (PyTorch's names)
    """(var, mean) over `dim`, in one call, as PyTorch's."""
    return rd.var(input, dim, keepdim=keepdim, correction=correction), rd.mean(input, dim, keepdim=keepdim)


@declare()
def std_mean(input, dim=None, *, correction=1, keepdim=False):  # noqa: A002
    """(std, mean) over `dim`."""
    return rd.std(input, dim, keepdim=keepdim, correction=correction), rd.mean(input, dim, keepdim=keepdim)


def _along(input, dim):
    """input with `dim` last (the whole tensor flattened for dim None), and how to put a reduced result back."""
    if dim is None:
        return input.reshape(-1), None
    d = _axis(dim, input.ndim)
    return (input.movedim(d, -1) if input.ndim else input.reshape(1)), d


def _restore(t, d, input, keepdim):
    """A result reduced along the last dim of `_along`'s view, in input's layout (`dim` d kept or dropped)."""
    if input.ndim == 0:
        return t.reshape(())
    return t.unsqueeze(d) if keepdim else t


def _median(input, dim, keepdim, ignore_nan, op):
    require(op, "keepdim", keepdim, FLAG)
    if dim is _WHOLE:
        if keepdim:
            raise ArgumentTypeError(f'{op}() missing 1 required positional arguments: "dim"')
        dim = None
    else:
        require(op, "dim", dim, INT)
    x, d = _along(input, dim)
    if x.shape[-1] == 0:
        raise IndexError(f"{op}(): Expected reduction dim {dim} to have non-zero size.")
    with no_grad():
        _, order = sort(x, dim=-1)
        if ignore_nan:   # sort puts nan last: the middle of the numbers before them
            count = (1.0 - isnan(x).float()).sum(-1, keepdim=True)
            k = where(count > 0, ((count - 1.0) * 0.5).floor(), 0.0)
        else:            # any nan makes the median nan (PyTorch's): a nan, last in the sort
            k = where(isnan(x).any(-1, keepdim=True), float(x.shape[-1] - 1), float((x.shape[-1] - 1) // 2))
        index = gather(order, -1, k.long())
    picked = gather(x, -1, index)
    if dim is None:
        return picked.reshape(())
    return _restore(picked.squeeze(-1), d, input, keepdim), _restore(index.squeeze(-1), d, input, keepdim)


@declare(method=True)
def median(input, dim=_WHOLE, keepdim=False):  # noqa: A002
    """The lower median (of the whole tensor, or (values, indices) along `dim`); nan if a nan is among them."""
    return _median(input, dim, keepdim, False, "median")


@declare(method=True)
def nanmedian(input, dim=_WHOLE, keepdim=False):  # noqa: A002
    """median ignoring nan (nan only where every element is nan)."""
    return _median(input, dim, keepdim, True, "nanmedian")


@declare(method=True)
def kthvalue(input, k, dim=-1, keepdim=False):  # noqa: A002
    """(values, indices) of the k-th smallest element along `dim` (k from 1; nan counts as the largest)."""
    require("kthvalue", "k", k, INT)
    require("kthvalue", "dim", dim, INT)
    require("kthvalue", "keepdim", keepdim, FLAG)
    x, d = _along(input, dim)
    if not 1 <= k <= x.shape[-1]:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")
    with no_grad():
        _, order = sort(x, dim=-1)
        index = order.narrow(-1, k - 1, 1)
    picked = gather(x, -1, index)
    return _restore(picked.squeeze(-1), d, input, keepdim), _restore(index.squeeze(-1), d, input, keepdim)


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan, op):
    if not isinstance(q, Tensor) and not (NUMBER.fits(q) or (isinstance(q, (list, tuple)) and all(
            NUMBER.fits(v) for v in q))):
        raise ArgumentTypeError(f"{op}(): argument 'q' must be float or Tensor, not {type(q).__name__}")
    if dim is not None:
        require(op, "dim", dim, INT)
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{op}() interpolation must be one of linear, lower, higher, midpoint or nearest, "
                           f"but got {interpolation}")
    if not input.dtype.is_float:
        raise RuntimeError(f"{op}() input tensor must be either float or double dtype")
    qs = q.numpy().astype(np.float64) if isinstance(q, Tensor) else np.asarray(q, dtype=np.float64)
    if qs.ndim > 1:
        raise RuntimeError(f"{op}() q must be a scalar or 1D tensor")
    outside = qs[(qs < 0) | (qs > 1)]
    if outside.size:
        raise RuntimeError(f"{op}() q must be in the range [0, 1] but got {outside[0]}")
    x, d = _along(input, dim)
    if x.shape[-1] == 0:
        raise RuntimeError(f"{op}() input tensor must be non-empty")
    values, _ = sort(x, dim=-1)
    with no_grad():
        if ignore_nan:
            valid = (1.0 - isnan(x).float()).sum(-1, keepdim=True)
            last = where(valid > 0, valid - 1.0, 0.0)
        else:
            last = zeros(*x.shape[:-1], 1) + float(x.shape[-1] - 1)
    results = []
    for qv in qs.reshape(-1):
        with no_grad():
            pos = last * float(qv)
            low, high = pos.floor(), pos.ceil()
            if interpolation == "lower":
                high = low
            elif interpolation == "higher":
                low = high
            elif interpolation == "nearest":
                low = high = pos.round()
            weight = 0.5 if interpolation == "midpoint" else pos - low
        below, above = gather(values, -1, low.long()), gather(values, -1, high.long())
        picked = below + (above - below) * weight
        if ignore_nan:
            picked = where(valid > 0, picked, math.nan)
        else:
            picked = where(isnan(x).any(-1, keepdim=True), math.nan, picked)
        if dim is None:
            picked = picked.reshape((1,) * input.ndim if keepdim else ())
        else:
            picked = _restore(picked.squeeze(-1), d, input, keepdim)
        results.append(picked)
    return results[0] if qs.ndim == 0 else stack(results)


@declare(method=True)
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """The q-th quantiles (q a number or a 1-D tensor of them, in [0, 1]) of the whole tensor or along `dim`;
    nan where a nan is among the values."""
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


@declare(method=True)
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """quantile ignoring nan."""
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")


def _cumulative_extreme(input, dim, op, pick_max):
    d = _axis(dim, max(input.ndim, 1))
    x = input.movedim(d, -1) if input.ndim else input.reshape(1)
    n = x.shape[-1]
    with no_grad():
        later = (arange(n).reshape(-1, 1) < arange(n).reshape(1, -1))   # [i, j]: j after i
        rows = x.unsqueeze(-2).expand(*x.shape[:-1], n, n)              # [..., i, j] = x[j]
        fill = -math.inf if pick_max else math.inf
        masked = where(later, fill, rows.float() if not x.dtype.is_float else rows)
        best = rd.amax(masked, -1, keepdim=True) if pick_max else rd.amin(masked, -1, keepdim=True)
        nan_seen = isnan(masked).any(-1, keepdim=True) if x.dtype.is_float else None
        hits = logical.eq(masked, best)
        if nan_seen is not None:   # a nan wins from where it appears: its last position so far
            hits = where(nan_seen, isnan(masked), hits)
        positions = where(hits & logical.logical_not(later), arange(n).reshape(1, -1).float(), -1.0)
        index = rd.amax(positions, -1).long()
    values = gather(x, -1, index)
    if input.ndim == 0:
        return values.reshape(()), index.reshape(())
    return values.movedim(-1, d), index.movedim(-1, d)


@declare(method=True)
def cummax(input, dim):  # noqa: A002
    """(values, indices): the running maximum along `dim` and where it was (the latest of equal ones)."""
    return _cumulative_extreme(input, dim, "cummax", True)


@declare(method=True)
def cummin(input, dim):  # noqa: A002
    """(values, indices): the running minimum along `dim` and where it was (the latest of equal ones)."""
    return _cumulative_extreme(input, dim, "cummin", False)


@declare(method=True)
def histc(input, bins=100, min=0, max=0):  # noqa: A002
    """Counts of the elements in `bins` equal-width bins over [min, max] (the data's own range when both are
    0); elements outside are left out, max falls in the last bin. Float result, as PyTorch's."""
    require("histc", "bins", bins, INT)
    for name, value in (("min", min), ("max", max)):
        if isinstance(value, Tensor) or not NUMBER.fits(value):
            raise ArgumentTypeError(f"histc(): argument '{name}' must be Number, not {type(value).__name__}")
    if not input.dtype.is_float:
        raise NotImplementedError(f'"histogram_cpu" not implemented for \'{_scalar_name(input)}\'')
    if bins <= 0:
        raise RuntimeError(f"torch.histc(): bins must be > 0, but got {bins} for dimension 0")
    lo, hi = float(min), float(max)
    if lo == hi and input.numel():
        lo, hi = float(rd.amin(input).item()), float(rd.amax(input).item())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError(f"torch.histc(): max must be larger than min, but got min {lo} max {hi}")
    with no_grad():
        x = input.reshape(-1).float()
        inside = (x >= lo) & (x <= hi)
        index = ((x - lo) * (bins / (hi - lo))).floor().clamp(0, bins - 1).long()
        counts = logical.eq(index.unsqueeze(-1), arange(bins).reshape(1, -1)) & inside.unsqueeze(-1)
        return counts.float().sum(0).to(input.dtype)


@declare(method=True)
def bincount(input, weights=None, minlength=0):  # noqa: A002
    """How often each value 0, 1, ... occurs in the 1-D non-negative integer `input` (its weights summed with
    `weights`); length max(input) + 1, at least `minlength`. Reads the largest value back (the length
    depends on it), as PyTorch does."""
    if weights is not None:
        require("bincount", "weights", weights, TENSOR)
    require("bincount", "minlength", minlength, INT)
    if input.dtype.is_float:
        raise NotImplementedError(f'"bincount_cpu" not implemented for \'{_scalar_name(input)}\'')
    if input.ndim != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    largest = int(rd.amax(input).item()) if input.numel() else -1
    if input.numel() and int(rd.amin(input).item()) < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and tuple(weights.shape) != tuple(input.shape):
        raise ShapeError("weights should be 1-d and have the same length as input")
    length = builtins.max(largest + 1, int(minlength))
    src = weights.float() if weights is not None else tensor(np.ones(input.shape[0], np.float32))
    counts = scatter_add(zeros(length, device=input.device), 0, input, src)
    return counts if weights is not None else counts.to(INT64)
