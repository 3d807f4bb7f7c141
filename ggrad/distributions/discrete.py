"""Bernoulli, Geometric, Categorical and OneHotCategorical, given by probabilities or by logits (PyTorch's two
parameterizations), and Poisson."""

from __future__ import annotations

import math
from typing import Any, Sequence

from ..autograd import Tensor, grad_mode
from ..autograd.factory import full, generator as _host_generator, tensor
from ..autograd.ops import (binary_cross_entropy_with_logits, broadcast_shapes, gather, lgamma, log1p, logsumexp,
                            multinomial, one_hot, softmax, where, xlogy)
from .distribution import Distribution

__all__ = ["Bernoulli", "Categorical", "Geometric", "OneHotCategorical", "Poisson"]

_EPS = 1.1920928955078125e-07      # float32's machine epsilon: probabilities clamped to [eps, 1 - eps] for logits
_LOWEST = -3.4028234663852886e38   # float32's lowest value: a -inf logit times a 0 probability stays 0


def _one_of(probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    value = probs if probs is not None else logits
    value = value if isinstance(value, Tensor) else tensor(value)
    return value if value.dtype.is_float else value.float()


class Bernoulli(Distribution):
    """1 with probability `probs` (or sigmoid(`logits`)), else 0.

    Args:
        probs (float or Tensor, optional): the probability of 1, in [0, 1].
        logits (float or Tensor, optional): its log-odds.
    """

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: bool | None = None) -> None:
        value = _one_of(probs, logits)
        super().__init__(value.shape, (), validate_args)
        _binary_parameters(self, value, probs is not None)

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with grad_mode.no_grad():
            u = tensor(_host_generator().random(shape, dtype="float32"), device=self.probs.device)
            return (u < self.probs.expand(shape)).float()

    def log_prob(self, value: Any) -> Tensor:
        value = self._value(value).float()
        shape = broadcast_shapes(value.shape, self.logits.shape, "Bernoulli.log_prob")
        return -binary_cross_entropy_with_logits(self.logits.expand(shape), value.expand(shape), reduction="none")

    def entropy(self) -> Tensor:
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")


class Categorical(Distribution):
    """One of K categories (the last dim of `probs` or `logits`), with those (unnormalized) weights.

    Args:
        probs (Tensor, optional): non-negative weights of the categories (normalized here).
        logits (Tensor, optional): their unnormalized log-probabilities.
    """

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: bool | None = None) -> None:
        value = _one_of(probs, logits)
        if value.ndim < 1:
            raise ValueError("`probs` or `logits` parameter must be at least one-dimensional.")
        super().__init__(value.shape[:-1], (), validate_args)
        if probs is not None:
            self._check("probs", value, value >= 0, "Simplex()")
            self.probs = value / value.sum(-1, keepdim=True)
            self.logits = self.probs.clamp(_EPS, 1 - _EPS).log()
        else:
            self.logits = value - logsumexp(value, -1, keepdim=True)
            self.probs = softmax(value, -1)
        self._num_events = value.shape[-1]

    @property
    def param_shape(self) -> tuple[int, ...]:
        return tuple(self.probs.shape)

    @property
    def mean(self) -> Tensor:
        return full(self.batch_shape, math.nan)

    @property
    def variance(self) -> Tensor:
        return full(self.batch_shape, math.nan)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        count = math.prod(sample_shape)
        with grad_mode.no_grad():
            drawn = multinomial(self.probs.reshape(-1, self._num_events), count, replacement=True)
        return drawn.transpose(0, 1).reshape(tuple(sample_shape) + self.batch_shape)

    def log_prob(self, value: Any) -> Tensor:
        value = self._value(value).long()
        shape = broadcast_shapes(value.shape, self.batch_shape, "Categorical.log_prob")
        logits = self.logits.expand(shape + (self._num_events,))
        return gather(logits, -1, value.expand(shape).unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> Tensor:
        return -(self.logits.clamp(min=_LOWEST) * self.probs).sum(-1)


def _binary_parameters(dist, value, given_probs):
    """Set `dist.probs` and `dist.logits` of a two-outcome distribution from the probabilities (given_probs)
    or the log-odds `value` (PyTorch's rules: probabilities clamped to [eps, 1 - eps] for the logits)."""
    if given_probs:
        dist._check("probs", value, (value >= 0) & (value <= 1), "Interval(lower_bound=0.0, upper_bound=1.0)")
        clamped = value.clamp(_EPS, 1 - _EPS)
        dist.probs, dist.logits = value, clamped.log() - (1 - clamped).log()
    else:
        dist.logits, dist.probs = value, value.sigmoid()


class Geometric(Distribution):
    """The number of failures before the first success of Bernoulli(`probs`) trials: p (1 - p)^k.

    Args:
        probs (float or Tensor, optional): the success probability, in (0, 1].
        logits (float or Tensor, optional): its log-odds.
    """

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: bool | None = None) -> None:
        value = _one_of(probs, logits)
        super().__init__(value.shape, (), validate_args)
        _binary_parameters(self, value, probs is not None)
        if probs is not None:
            self._check("probs", self.probs, self.probs > 0, "Interval(lower_bound=0.0, upper_bound=1.0)")

    mean = property(lambda self: 1.0 / self.probs - 1.0)
    mode = property(lambda self: self.probs * 0.0)
    variance = property(lambda self: (1.0 / self.probs - 1.0) / self.probs)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with grad_mode.no_grad():
            u = tensor(_host_generator().random(shape).astype("float32"), device=self.probs.device)
            return (u.clamp(min=1.1754943508222875e-38).log() / log1p(-self.probs.expand(shape))).floor()

    def log_prob(self, value: Any) -> Tensor:
        value = self._value(value).float()
        shape = broadcast_shapes(value.shape, self.probs.shape, "Geometric.log_prob")
        value, probs = value.expand(shape), self.probs.expand(shape)
        failures = where((probs == 1) & (value == 0), 0.0, probs)   # 0 * log(0) where p = 1 and k = 0
        return value * log1p(-failures) + probs.log()

    def entropy(self) -> Tensor:
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs


class OneHotCategorical(Distribution):
    """Categorical draws as one-hot vectors of the K categories (the event shape is (K,)).

    Args:
        probs (Tensor, optional): non-negative weights of the categories. logits (Tensor, optional): their
            unnormalized log-probabilities.
    """

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: bool | None = None) -> None:
        self._categorical = Categorical(probs, logits, validate_args)
        super().__init__(self._categorical.batch_shape, (self._categorical._num_events,), validate_args)

    probs = property(lambda self: self._categorical.probs)
    logits = property(lambda self: self._categorical.logits)
    mean = property(lambda self: self._categorical.probs)
    variance = property(lambda self: self.probs * (1 - self.probs))

    @property
    def mode(self) -> Tensor:
        return one_hot(self.probs.argmax(-1), self.event_shape[0]).to(self.probs.dtype)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        drawn = self._categorical.sample(sample_shape)
        return one_hot(drawn, self.event_shape[0]).to(self.probs.dtype)

    def log_prob(self, value: Any) -> Tensor:
        return self._categorical.log_prob(self._value(value).argmax(-1))

    def entropy(self) -> Tensor:
        return self._categorical.entropy()


class Poisson(Distribution):
    """rate^k e^(-rate) / k! on k = 0, 1, 2, ...

    Args:
        rate (float or Tensor): >= 0.
    """

    def __init__(self, rate: Any, validate_args: bool | None = None) -> None:
        self.rate = rate if isinstance(rate, Tensor) else tensor(float(rate))
        self.rate = self.rate if self.rate.dtype.is_float else self.rate.float()
        super().__init__(self.rate.shape, (), validate_args)
        self._check("rate", self.rate, self.rate >= 0, "GreaterThanEq(lower_bound=0.0)")

    mean = property(lambda self: self.rate)
    mode = property(lambda self: self.rate.floor())
    variance = property(lambda self: self.rate)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        rate = self.rate.detach().numpy()
        drawn = _host_generator().poisson(rate, size=shape) if shape else _host_generator().poisson(rate)
        return tensor(drawn.astype("float32"), device=self.rate.device)

    def log_prob(self, value: Any) -> Tensor:
        value = self._value(value).float()
        self._check("value", value, (value >= 0) & (value == value.floor()), "IntegerGreaterThan(lower_bound=0)")
        return xlogy(value, self.rate) - self.rate - lgamma(value + 1)

    def __repr__(self) -> str:
        return f"Poisson(rate: {tuple(self.rate.shape) if self.rate.ndim else self.rate})"
