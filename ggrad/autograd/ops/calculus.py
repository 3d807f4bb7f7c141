"""PyTorch's trapezoid rule: trapezoid (trapz) and cumulative_trapezoid, along one dim."""

from ..tensor import Tensor, _axis
from .scan import cumsum


def _spacing(y, x, dx, d):
    """The widths of the intervals along dim d: from sample points x, or the constant dx."""
    if x is None:
        return 1.0 if dx is None else dx
    if isinstance(x, Tensor):
        widths = x.diff(dim=-1 if x.ndim == 1 else d)
        if x.ndim == 1:
            shape = [1] * y.ndim
            shape[d] = widths.shape[0]
            return widths.reshape(shape)
        return widths
    return float(x)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The integral of y along `dim` by the trapezoid rule, with sample points x (a tensor) or spacing dx."""
    d = _axis(dim, y.ndim)
    if y.shape[d] == 0:
        return y.sum(d)
    n = y.shape[d]
    pairs = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) * 0.5
    return (pairs * _spacing(y, x, dx, d)).sum(d)


def trapz(y, x=None, *, dx=None, dim=-1):
    """trapezoid's older name (positional x, or keyword dx)."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoid integral along `dim` (one element shorter than y there)."""
    d = _axis(dim, y.ndim)
    n = y.shape[d]
    pairs = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) * 0.5
    return cumsum(pairs * _spacing(y, x, dx, d), d)
