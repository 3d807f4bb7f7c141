"""Bernoulli and Categorical, given by probabilities or by logits (PyTorch's two parameterizations)."""

from __future__ import annotations

import math
from typing import Any, Sequence

from ..autograd import Tensor, grad_mode
from ..autograd.factory import full, generator as _host_generator, tensor
from ..autograd.ops import binary_cross_entropy_with_logits, broadcast_shapes, gather, logsumexp, multinomial, softmax
from .distribution import Distribution

__all__ = ["Bernoulli", "Categorical"]

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
        if probs is not None:
            self._check("probs", value, (value >= 0) & (value <= 1), "Interval(lower_bound=0.0, upper_bound=1.0)")
            clamped = value.clamp(_EPS, 1 - _EPS)
            self.probs, self.logits = value, clamped.log() - (1 - clamped).log()
        else:
            self.logits, self.probs = value, value.sigmoid()

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
