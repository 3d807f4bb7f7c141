"""PyTorch's trapezoid rule: trapezoid (trapz) and cumulative_trapezoid, along one dim."""

from ..arguments import INT, TENSOR, require
from ..tensor import Tensor, _axis
from .scan import cumsum
from ..declaration import declare


_NO_X = object()   # "no sample points given" (PyTorch refuses an explicit None)


def _check(op, y, x, dim):
    """PyTorch's parse: y a Tensor, x (positional) a Tensor, dim an int."""
    require(op, "y", y, TENSOR)
    if x is not _NO_X:
        require(op, "x", x, TENSOR)
    require(op, "dim", dim, INT)


def _spacing(y, x, dx, d):
    """The widths of the intervals along dim d: from sample points x, or the constant dx."""
    if x is _NO_X:
        return 1.0 if dx is None else dx
    if isinstance(x, Tensor):
        widths = x.diff(dim=-1 if x.ndim == 1 else d)
        if x.ndim == 1:
            shape = [1] * y.ndim
            shape[d] = widths.shape[0]
            return widths.reshape(shape)
        return widths
    return float(x)


@declare()
def trapezoid(y, x=_NO_X, *, dx=None, dim=-1):
    """The integral of y along `dim` by the trapezoid rule, with sample points x (a tensor) or spacing dx."""
    return _integral("trapezoid", y, x, dx, dim)


@declare()
def trapz(y, x=_NO_X, *, dx=None, dim=-1):
    """trapezoid's older name (positional x, or keyword dx)."""
    return _integral("trapz", y, x, dx, dim)


def _integral(op, y, x, dx, dim):
    _check(op, y, x, dim)
    d = _axis(dim, y.ndim)
    if y.shape[d] == 0:
        return y.sum(d)
    n = y.shape[d]
    pairs = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) * 0.5
    return (pairs * _spacing(y, x, dx, d)).sum(d)


@declare()
def cumulative_trapezoid(y, x=_NO_X, *, dx=None, dim=-1):
    """The running trapezoid integral along `dim` (one element shorter than y there)."""
    _check("cumulative_trapezoid", y, x, dim)
    d = _axis(dim, y.ndim)
    n = y.shape[d]
    pairs = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) * 0.5
    return cumsum(pairs * _spacing(y, x, dx, d), d)
