"""`Beta`: the beta distribution, its draws X / (X + Y) of two standard gamma draws (differentiable in both
concentrations through the gamma draws' implicit gradients; PyTorch draws through a Dirichlet, so a draw's
gradient differs from its for the same value, with the same expectation)."""

from __future__ import annotations

from typing import Any, Sequence

from ..autograd import Tensor
from ..autograd.ops import digamma, lgamma, where, xlogy
from .continuous import _params
from .distribution import Distribution
from .gamma import _TINY, standard_gamma

__all__ = ["Beta"]


class Beta(Distribution):
    """The beta distribution on [0, 1]: density x^(a - 1) (1 - x)^(b - 1) / B(a, b).

    Args:
        concentration1 (float or Tensor): a > 0.
        concentration0 (float or Tensor): b > 0.
    """

    has_rsample = True

    def __init__(self, concentration1: Any, concentration0: Any, validate_args: bool | None = None) -> None:
        (self.concentration1, self.concentration0), shape = _params(concentration1, concentration0)
        super().__init__(shape, (), validate_args)
        self._check("concentration1", self.concentration1, self.concentration1 > 0, "GreaterThan(lower_bound=0.0)")
        self._check("concentration0", self.concentration0, self.concentration0 > 0, "GreaterThan(lower_bound=0.0)")

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Tensor:
        """(a - 1) / (a + b - 2) with a - 1 and b - 1 clamped at 0; where both a, b < 1, 1 if a > b else 0."""
        a, b = self.concentration1, self.concentration0
        a1, b1 = (a - 1).clamp(min=0), (b - 1).clamp(min=0)
        return where((a < 1) & (b < 1), (a > b).float(), a1 / (a1 + b1))

    @property
    def variance(self) -> Tensor:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total * total * (total + 1))

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        x = standard_gamma(self.concentration1.expand(shape))
        y = standard_gamma(self.concentration0.expand(shape))
        return (x / (x + y)).clamp(_TINY, 1 - 2 ** -24)

    def log_prob(self, value: Any) -> Tensor:
        value = self._value(value)
        self._check("value", value, (value >= 0) & (value <= 1), "Interval(lower_bound=0.0, upper_bound=1.0)")
        a, b = self.concentration1, self.concentration0
        return xlogy(a - 1, value) + xlogy(b - 1, 1 - value) - _log_beta(a, b)

    def entropy(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        total = a + b
        return _log_beta(a, b) - (a - 1) * digamma(a) - (b - 1) * digamma(b) + (total - 2) * digamma(total)


def _log_beta(a: Tensor, b: Tensor) -> Tensor:
    return lgamma(a) + lgamma(b) - lgamma(a + b)
