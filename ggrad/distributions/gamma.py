"""`Gamma` and the standard gamma sampler it and `Beta` draw from, with reparameterized gradients.

Draws: Marsaglia and Tsang's rejection method ("A simple method for generating gamma variables", 2000) on
ggrad's generator (reproducible under `ggrad.manual_seed`; not PyTorch's stream), with the boost
x * U^(1/a) for a < 1; draws are clamped to float32's tiny, as PyTorch's. The gradient of a draw x with
respect to its concentration a is the implicit one (the draw's CDF held fixed): dx/da = -(dP/da) / p(x),
P the regularized lower incomplete gamma function, evaluated in float64 on the host (ops/incomplete_gamma.py;
dP/da by a central difference), as PyTorch's `_standard_gamma_grad` gives it. `cdf` is P too.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..autograd import Function, Tensor
from ..autograd.factory import generator as _host_generator, tensor
from ..autograd.ops import digamma, igamma, lgamma, xlogy
from ..autograd.ops.incomplete_gamma import lower_regularized_gamma
from .continuous import _params
from .distribution import Distribution

__all__ = ["Chi2", "Gamma", "standard_gamma"]

_TINY = float(np.finfo(np.float32).tiny)
_lgamma64 = np.vectorize(math.lgamma, otypes=[np.float64])


def _marsaglia_tsang(a, rng):
    """Standard gamma draws of shape a.shape (a > 0, float64) from the numpy Generator `rng`."""
    boost = a < 1
    d = np.where(boost, a + 1.0, a) - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    d, c = d.reshape(-1), c.reshape(-1)
    out = np.empty_like(d)
    todo = np.arange(d.size)
    while todo.size:
        z = rng.standard_normal(todo.size)
        u = rng.random(todo.size)
        v = (1.0 + c[todo] * z) ** 3
        positive = v > 0
        log_v = np.log(np.where(positive, v, 1.0))
        accept = positive & (np.log(u) < 0.5 * z * z + d[todo] - d[todo] * v + d[todo] * log_v)
        out[todo[accept]] = d[todo[accept]] * v[accept]
        todo = todo[~accept]
    out = out.reshape(a.shape)
    if boost.any():
        out = np.where(boost, out * rng.random(a.shape) ** (1.0 / a), out)
    return np.maximum(out, _TINY)


def standard_gamma_grad(a, x):
    """dx/da of standard gamma draws x of concentrations a (float64 arrays), the CDF held fixed."""
    step = 1e-5 * np.maximum(a, 1e-3)
    dp = (lower_regularized_gamma(a + step, x) - lower_regularized_gamma(a - step, x)) / (2 * step)
    density = np.exp((a - 1) * np.log(x) - x - _lgamma64(a))
    return -dp / density


class _StandardGamma(Function):
    """Draws of Gamma(a, 1), one per element of `a`; the gradient is the implicit reparameterization's."""

    @staticmethod
    def forward(ctx, concentration):
        a = concentration.detach().numpy().astype(np.float64)
        x = _marsaglia_tsang(a, _host_generator())
        ctx.slope = tensor(standard_gamma_grad(a, x).astype(np.float32), device=concentration.device)
        return tensor(x.astype(np.float32), device=concentration.device)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.slope


def standard_gamma(concentration: Tensor) -> Tensor:
    """Gamma(concentration, 1) draws of the concentration's shape, differentiable in it (PyTorch's
    torch._standard_gamma)."""
    return _StandardGamma.apply(concentration)


class Gamma(Distribution):
    """The gamma distribution with shape `concentration` and inverse scale `rate`: density
    rate^a x^(a - 1) e^(-rate x) / Gamma(a).

    Args:
        concentration (float or Tensor): a > 0.
        rate (float or Tensor): > 0.
    """

    has_rsample = True

    def __init__(self, concentration: Any, rate: Any, validate_args: bool | None = None) -> None:
        (self.concentration, self.rate), shape = _params(concentration, rate)
        super().__init__(shape, (), validate_args)
        self._check("concentration", self.concentration, self.concentration > 0, "GreaterThan(lower_bound=0.0)")
        self._check("rate", self.rate, self.rate > 0, "GreaterThan(lower_bound=0.0)")

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / (self.rate * self.rate)

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        return value.clamp(min=_TINY)

    def log_prob(self, value: Any) -> Tensor:
        value = self._value(value)
        self._check("value", value, value >= 0, "GreaterThanEq(lower_bound=0.0)")
        return (self.concentration * self.rate.log() + xlogy(self.concentration - 1, value) - self.rate * value
                - lgamma(self.concentration))

    def cdf(self, value: Any) -> Tensor:
        """P(concentration, rate * value), the regularized lower incomplete gamma function (ggrad.igamma):
        differentiable in value and rate as PyTorch's, and in concentration too (PyTorch: none)."""
        value = self._value(value)
        self._check("value", value, value >= 0, "GreaterThanEq(lower_bound=0.0)")
        return igamma(self.concentration, self.rate * value)

    def entropy(self) -> Tensor:
        a = self.concentration
        return a - self.rate.log() + lgamma(a) + (1.0 - a) * digamma(a)

    def __repr__(self) -> str:
        return f"Gamma(concentration: {_shown(self.concentration)}, rate: {_shown(self.rate)})"


def _shown(t: Tensor) -> Any:
    return tuple(t.shape) if t.ndim else t.item()


class Chi2(Gamma):
    """The chi-squared distribution with `df` degrees of freedom: Gamma(df / 2, 1 / 2).

    Args:
        df (float or Tensor): > 0.
    """

    def __init__(self, df: Any, validate_args: bool | None = None) -> None:
        (df,), _ = _params(df)
        super().__init__(0.5 * df, 0.5, validate_args)

    @property
    def df(self) -> Tensor:
        return self.concentration * 2

    def __repr__(self) -> str:
        return f"Chi2(df: {_shown(self.df)})"
