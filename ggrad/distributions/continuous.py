"""Normal and Uniform, with reparameterized sampling (gradients flow to their parameters)."""

from __future__ import annotations

import math
from typing import Any, Sequence

from ..autograd import Tensor
from ..autograd.factory import generator as _host_generator, tensor
from ..autograd.ops import broadcast_shapes, erf, erfinv, where
from .distribution import Distribution

__all__ = ["Normal", "Uniform"]


def _params(*values):
    """The parameters as float tensors of their common (broadcast) shape."""
    ts = [v if isinstance(v, Tensor) else tensor(float(v)) for v in values]
    ts = [t if t.dtype.is_float else t.float() for t in ts]
    shape = ()
    for t in ts:
        shape = broadcast_shapes(shape, t.shape, "distribution")
    return [t.expand(shape) for t in ts], shape


class Normal(Distribution):
    """The normal distribution N(loc, scale**2).

    Args:
        loc (float or Tensor): the mean.
        scale (float or Tensor): the standard deviation (> 0).
    """

    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        (self.loc, self.scale), shape = _params(loc, scale)
        super().__init__(shape, (), validate_args)
        self._check("scale", self.scale, self.scale > 0, "GreaterThan(lower_bound=0.0)")

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return self.scale * self.scale

    @property
    def stddev(self) -> Tensor:
        return self.scale

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        noise = tensor(_host_generator().standard_normal(shape).astype("float32"), device=self.loc.device)
        return self.loc + noise * self.scale

    def log_prob(self, value: Any) -> Tensor:
        value = self._value(value)
        return -((value - self.loc) ** 2) / (2 * self.variance) - self.scale.log() - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value: Any) -> Tensor:
        return 0.5 * (1 + erf((self._value(value) - self.loc) / (self.scale * math.sqrt(2))))

    def icdf(self, value: Any) -> Tensor:
        return self.loc + self.scale * erfinv(2 * self._value(value) - 1) * math.sqrt(2)

    def entropy(self) -> Tensor:
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()


class Uniform(Distribution):
    """The uniform distribution on [low, high).

    Args:
        low (float or Tensor): the lower end.
        high (float or Tensor): the upper end (> low).
    """

    has_rsample = True

    def __init__(self, low: Any, high: Any, validate_args: bool | None = None) -> None:
        (self.low, self.high), shape = _params(low, high)
        super().__init__(shape, (), validate_args)
        self._check("low", self.low, self.low < self.high, "LessThan(upper_bound=high)")

    @property
    def mean(self) -> Tensor:
        return (self.high + self.low) / 2

    @property
    def variance(self) -> Tensor:
        return (self.high - self.low) ** 2 / 12

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = tensor(_host_generator().random(shape, dtype="float32"), device=self.low.device)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value: Any) -> Tensor:
        value = self._value(value)
        inside = (value >= self.low) & (value < self.high)
        self._check("value", value, inside, "within the support [low, high)")
        return where(inside, -(self.high - self.low).log(), -math.inf)

    def cdf(self, value: Any) -> Tensor:
        return ((self._value(value) - self.low) / (self.high - self.low)).clamp(0, 1)

    def entropy(self) -> Tensor:
        return (self.high - self.low).log()
