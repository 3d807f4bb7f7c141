"""Continuous distributions whose draws are a uniform or normal draw transformed (by the inverse CDF, exp or
abs), so that `rsample` is differentiable in the parameters: Exponential, Laplace, Cauchy, Gumbel, LogNormal
and HalfNormal, with PyTorch's log_prob, cdf, icdf, entropy, mean, mode and variance."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..autograd import Tensor
from ..autograd.factory import full, generator as _host_generator, tensor
from ..autograd.ops import atan, expm1, log1p, sign, tan, where
from .continuous import Normal, _params
from .distribution import Distribution

__all__ = ["Exponential", "Laplace", "Cauchy", "Gumbel", "LogNormal", "HalfNormal"]

_EULER = 0.57721566490153286061
_EPS = float(np.finfo(np.float32).eps)
_TINY = float(np.finfo(np.float32).tiny)


def _uniform(shape, like, low=0.0, high=1.0):
    """Uniform float32 draws in [low, high) of `shape` from ggrad's generator, on `like`'s device."""
    u = _host_generator().random(shape) * (high - low) + low
    return tensor(u.astype(np.float32), device=like.device)


class _LocScale(Distribution):
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        (self.loc, self.scale), shape = _params(loc, scale)
        super().__init__(shape, (), validate_args)
        self._check("scale", self.scale, self.scale > 0, "GreaterThan(lower_bound=0.0)")

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return self._from_uniform(_uniform(shape, self.loc, *self._uniform_range))

    _uniform_range = (_TINY, 1.0 - _EPS)

    def _from_uniform(self, u: Tensor) -> Tensor:
        return self.icdf(u)


class Exponential(Distribution):
    """rate e^(-rate x) on x >= 0.

    Args:
        rate (float or Tensor): > 0.
    """

    has_rsample = True

    def __init__(self, rate: Any, validate_args: bool | None = None) -> None:
        (self.rate,), shape = _params(rate)
        super().__init__(shape, (), validate_args)
        self._check("rate", self.rate, self.rate > 0, "GreaterThan(lower_bound=0.0)")

    mean = property(lambda self: 1.0 / self.rate)
    mode = property(lambda self: self.rate * 0.0)
    stddev = property(lambda self: 1.0 / self.rate)
    variance = property(lambda self: self.rate ** -2)

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return -log1p(-_uniform(shape, self.rate, 0.0, 1.0 - _EPS)) / self.rate

    def log_prob(self, value: Any) -> Tensor:
        value = self._value(value)
        self._check("value", value, value >= 0, "GreaterThanEq(lower_bound=0.0)")
        return self.rate.log() - self.rate * value

    def cdf(self, value: Any) -> Tensor:
        return 1 - (-self.rate * self._value(value)).exp()

    def icdf(self, value: Any) -> Tensor:
        return -log1p(-self._value(value)) / self.rate

    def entropy(self) -> Tensor:
        return 1.0 - self.rate.log()

    def __repr__(self) -> str:
        return f"Exponential(rate: {tuple(self.rate.shape) if self.rate.ndim else self.rate})"


class Laplace(_LocScale):
    """exp(-|x - loc| / scale) / (2 scale).

    Args:
        loc (float or Tensor): the mean. scale (float or Tensor): > 0.
    """

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)
    variance = property(lambda self: 2 * self.scale ** 2)
    stddev = property(lambda self: math.sqrt(2) * self.scale)
    _uniform_range = (-1.0 + _EPS, 1.0)

    def _from_uniform(self, u: Tensor) -> Tensor:
        return self.loc - self.scale * sign(u) * log1p(-u.abs())

    def log_prob(self, value: Any) -> Tensor:
        value = self._value(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value: Any) -> Tensor:
        shifted = self._value(value) - self.loc
        return 0.5 - 0.5 * sign(shifted) * expm1(-shifted.abs() / self.scale)

    def icdf(self, value: Any) -> Tensor:
        term = self._value(value) - 0.5
        return self.loc - self.scale * sign(term) * log1p(-2 * term.abs())

    def entropy(self) -> Tensor:
        return 1 + (2 * self.scale).log()


class Cauchy(_LocScale):
    """scale / (pi (scale^2 + (x - loc)^2)): no mean or variance.

    Args:
        loc (float or Tensor): the median. scale (float or Tensor): the half width at half maximum, > 0.
    """

    mean = property(lambda self: full(self.batch_shape, math.nan))
    mode = property(lambda self: self.loc)
    variance = property(lambda self: full(self.batch_shape, math.inf))

    def log_prob(self, value: Any) -> Tensor:
        z = (self._value(value) - self.loc) / self.scale
        return -math.log(math.pi) - self.scale.log() - log1p(z * z)

    def cdf(self, value: Any) -> Tensor:
        return atan((self._value(value) - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value: Any) -> Tensor:
        return tan(math.pi * (self._value(value) - 0.5)) * self.scale + self.loc

    def entropy(self) -> Tensor:
        return math.log(4 * math.pi) + self.scale.log()


class Gumbel(_LocScale):
    """The Gumbel (type-I extreme value) distribution: exp(-(z + e^-z)) / scale, z = (x - loc) / scale.

    Args:
        loc (float or Tensor): the mode. scale (float or Tensor): > 0.
    """

    mean = property(lambda self: self.loc + self.scale * _EULER)
    mode = property(lambda self: self.loc)
    stddev = property(lambda self: (math.pi / math.sqrt(6)) * self.scale)
    variance = property(lambda self: self.stddev ** 2)

    def log_prob(self, value: Any) -> Tensor:
        y = (self.loc - self._value(value)) / self.scale
        return (y - y.exp()) - self.scale.log()

    def cdf(self, value: Any) -> Tensor:
        return (-(-(self._value(value) - self.loc) / self.scale).exp()).exp()

    def icdf(self, value: Any) -> Tensor:
        return self.loc - self.scale * (-(self._value(value).log())).log()

    def entropy(self) -> Tensor:
        return self.scale.log() + (1 + _EULER)


class LogNormal(Distribution):
    """exp of a normal draw: log x ~ N(loc, scale^2).

    Args:
        loc (float or Tensor): the mean of log x. scale (float or Tensor): its standard deviation, > 0.
    """

    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.base_dist = Normal(loc, scale, validate_args)
        self.loc, self.scale = self.base_dist.loc, self.base_dist.scale
        super().__init__(self.base_dist.batch_shape, (), validate_args)

    mean = property(lambda self: (self.loc + self.scale ** 2 / 2).exp())
    mode = property(lambda self: (self.loc - self.scale ** 2).exp())
    variance = property(lambda self: expm1(self.scale ** 2) * (2 * self.loc + self.scale ** 2).exp())

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        return self.base_dist.rsample(sample_shape).exp()

    def log_prob(self, value: Any) -> Tensor:
        value = self._value(value)
        self._check("value", value, value > 0, "GreaterThan(lower_bound=0.0)")
        log_value = value.log()
        return self.base_dist.log_prob(log_value) - log_value

    def cdf(self, value: Any) -> Tensor:
        return self.base_dist.cdf(self._value(value).log())

    def icdf(self, value: Any) -> Tensor:
        return self.base_dist.icdf(value).exp()

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() + self.loc


class HalfNormal(Distribution):
    """|x| for x ~ N(0, scale^2).

    Args:
        scale (float or Tensor): > 0.
    """

    has_rsample = True

    def __init__(self, scale: Any, validate_args: bool | None = None) -> None:
        (self.scale,), shape = _params(scale)
        self.base_dist = Normal(self.scale * 0.0, self.scale, validate_args)
        super().__init__(shape, (), validate_args)

    mean = property(lambda self: self.scale * math.sqrt(2 / math.pi))
    mode = property(lambda self: self.scale * 0.0)
    variance = property(lambda self: self.scale ** 2 * (1 - 2 / math.pi))

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        return self.base_dist.rsample(sample_shape).abs()

    def log_prob(self, value: Any) -> Tensor:
        value = self._value(value)
        self._check("value", value, value >= 0, "GreaterThanEq(lower_bound=0.0)")
        return where(value >= 0, self.base_dist.log_prob(value) + math.log(2), -math.inf)

    def cdf(self, value: Any) -> Tensor:
        return 2 * self.base_dist.cdf(self._value(value)) - 1

    def icdf(self, value: Any) -> Tensor:
        return self.base_dist.icdf((self._value(value) + 1) / 2)

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() - math.log(2)
