"""In-place random fills of a tensor, as PyTorch's `uniform_`, `normal_`, `exponential_` and `random_`
(`self.weight.data.normal_(mean=0.0, std=0.02)` in model code). Values are drawn on the host from the
seeded generator (or `generator=`, a ggrad.Generator) and written with `copy_`, so views see them."""

import numbers

import numpy as np

from ..ggml.errors import ArgumentError, UnsupportedDTypeError
from .factory import generator as _stream, tensor
from .declaration import declare


def _real(value, name, op):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}(): argument '{name}' must be float, not {type(value).__name__}")
    return float(value)


def _floating(self, op):
    if not self.dtype.is_float:
        raise UnsupportedDTypeError(f"{op}: not implemented for {self.dtype.name} (a floating point tensor is needed)")


def _write(self, values):
    return self.copy_(tensor(values.astype(np.float32), dtype=self.dtype, device=self.device))


@declare(function=False, method=True)
def uniform_(self, from_=0.0, to=1.0, *, generator=None):
    """Fill with numbers drawn uniformly from [from_, to) (PyTorch's `from`, a Python keyword)."""
    a, b = _real(from_, "from", "uniform_"), _real(to, "to", "uniform_")
    _floating(self, "uniform_")
    if a > b:
        raise ArgumentError(f"uniform_ expects to return a [from, to) range, but found from={a} > to={b}")
    return _write(self, _stream(generator).uniform(a, b, self.shape))


@declare(function=False, method=True)
def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with numbers drawn from the normal distribution N(mean, std**2)."""
    mean, std = _real(mean, "mean", "normal_"), _real(std, "std", "normal_")
    _floating(self, "normal_")
    if std < 0:
        raise ArgumentError(f"normal expects std >= 0.0, but found std {std}")
    return _write(self, _stream(generator).normal(mean, std, self.shape))


@declare(function=False, method=True)
def exponential_(self, lambd=1.0, *, generator=None):
    """Fill with numbers drawn from the exponential distribution of rate `lambd`."""
    lambd = _real(lambd, "lambd", "exponential_")
    _floating(self, "exponential_")
    if lambd <= 0:
        raise ArgumentError(f"exponential_ expects lambd > 0.0, but found lambd={lambd}")
    return _write(self, _stream(generator).exponential(1.0 / lambd, self.shape))


@declare(function=False, method=True)
def random_(self, from_=0, to=None, *, generator=None):
    """Fill with integers drawn uniformly from [from_, to) (`random_(to)` is [0, to))."""
    if to is None:
        from_, to = 0, from_
    if to is None or isinstance(from_, bool) or not isinstance(from_, numbers.Integral) or \
            not isinstance(to, numbers.Integral):
        raise TypeError("random_(): from and to must be ints (ggrad has no default range for random_())")
    if from_ >= to:
        raise ArgumentError(f"random_ expects 'from' to be less than 'to', but got from={from_} >= to={to}")
    return _write(self, _stream(generator).integers(from_, to, self.shape).astype(np.float64))
