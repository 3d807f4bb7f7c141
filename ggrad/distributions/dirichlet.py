"""`Dirichlet` and `StudentT`: distributions drawn from standard gamma draws (gamma.py), so their draws are
differentiable in the parameters through the gammas' implicit gradients (PyTorch's Dirichlet draws carry its
own reparameterized gradient: the same expectation, not the same values per draw)."""

from __future__ import annotations

import math
from typing import Any, Sequence

from ..autograd import Tensor
from ..autograd.factory import generator as _host_generator, tensor
from ..autograd.ops import digamma, lgamma, log1p, one_hot, where, xlogy
from .continuous import _params
from .distribution import Distribution
from .gamma import _TINY, standard_gamma

__all__ = ["Dirichlet", "StudentT"]


class Dirichlet(Distribution):
    """The Dirichlet distribution over the simplex of the last dimension of `concentration`: density
    prod x_i^(a_i - 1) / B(a).

    Args:
        concentration (Tensor): a > 0, at least one-dimensional (its last dimension is the event).
    """

    has_rsample = True

    def __init__(self, concentration: Any, validate_args: bool | None = None) -> None:
        concentration = concentration if isinstance(concentration, Tensor) else tensor(concentration)
        if concentration.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration if concentration.dtype.is_float else concentration.float()
        super().__init__(self.concentration.shape[:-1], self.concentration.shape[-1:], validate_args)
        self._check("concentration", self.concentration, self.concentration > 0,
                    "IndependentConstraint(GreaterThan(lower_bound=0.0), 1)")

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self) -> Tensor:
        """(a - 1) / sum(a - 1) with a - 1 clamped at 0; where every a < 1, the corner of the largest a."""
        excess = (self.concentration - 1).clamp(min=0.0)
        mode = excess / excess.sum(-1, keepdim=True)
        corner = one_hot(self.concentration.argmax(-1), self.event_shape[0]).to(mode.dtype)
        return where((self.concentration < 1).all(-1, keepdim=True), corner, mode)

    @property
    def variance(self) -> Tensor:
        total = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (total - self.concentration) / (total * total * (total + 1))

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        draws = standard_gamma(self.concentration.expand(shape))
        return (draws / draws.sum(-1, keepdim=True)).clamp(min=_TINY, max=1 - 1.1920928955078125e-07)

    def log_prob(self, value: Any) -> Tensor:
        value = self._value(value)
        a = self.concentration
        return xlogy(a - 1.0, value).sum(-1) + lgamma(a.sum(-1)) - lgamma(a).sum(-1)

    def entropy(self) -> Tensor:
        a = self.concentration
        k, total = a.shape[-1], a.sum(-1)
        return lgamma(a).sum(-1) - lgamma(total) - (k - total) * digamma(total) - ((a - 1.0) * digamma(a)).sum(-1)

    def __repr__(self) -> str:
        return f"Dirichlet(concentration: {tuple(self.concentration.shape)})"


class StudentT(Distribution):
    """Student's t distribution with `df` degrees of freedom, location `loc` and scale `scale`.

    Args:
        df (float or Tensor): > 0. loc (float or Tensor, default 0). scale (float or Tensor, default 1): > 0.
    """

    has_rsample = True

    def __init__(self, df: Any, loc: Any = 0.0, scale: Any = 1.0, validate_args: bool | None = None) -> None:
        (self.df, self.loc, self.scale), shape = _params(df, loc, scale)
        super().__init__(shape, (), validate_args)
        self._check("df", self.df, self.df > 0, "GreaterThan(lower_bound=0.0)")
        self._check("scale", self.scale, self.scale > 0, "GreaterThan(lower_bound=0.0)")

    @property
    def mean(self) -> Tensor:
        return where(self.df > 1, self.loc, math.nan)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        finite = self.scale * self.scale * self.df / (self.df - 2).clamp(min=1e-30)
        return where(self.df > 2, finite, where(self.df > 1, math.inf, math.nan))

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        normal = tensor(_host_generator().standard_normal(shape).astype("float32"), device=self.df.device)
        chi2 = standard_gamma(self.df.expand(shape) * 0.5) * 2.0
        return self.loc + self.scale * normal * (chi2 / self.df).rsqrt()

    def log_prob(self, value: Any) -> Tensor:
        y = (self._value(value) - self.loc) / self.scale
        half = 0.5 * self.df
        norm = self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + lgamma(half) - lgamma(half + 0.5)
        return -(half + 0.5) * log1p(y * y / self.df) - norm

    def entropy(self) -> Tensor:
        half = 0.5 * self.df
        log_beta = lgamma(half) + math.lgamma(0.5) - lgamma(half + 0.5)
        return (self.scale.log() + (half + 0.5) * (digamma(half + 0.5) - digamma(half)) + 0.5 * self.df.log()
                + log_beta)

    def __repr__(self) -> str:
        shown = tuple(self.df.shape) if self.df.ndim else self.df.item()
        return f"StudentT(df: {shown}, loc: {tuple(self.loc.shape)}, scale: {tuple(self.scale.shape)})"
