"""Binomial and Multinomial: counts of successes in `total_count` trials (PyTorch's torch.distributions
Binomial and Multinomial), given by probabilities or logits."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..autograd import Tensor, grad_mode
from ..autograd.factory import arange, generator as _host_generator, tensor
from ..autograd.ops import broadcast_shapes, lgamma, log1p, one_hot
from .discrete import Categorical, _binary_parameters, _one_of
from .distribution import Distribution

__all__ = ["Binomial", "Multinomial"]


def _count(total_count, like):
    count = total_count if isinstance(total_count, Tensor) else tensor(float(total_count), device=like.device)
    return count if count.dtype.is_float else count.float()


class Binomial(Distribution):
    """The number of successes in `total_count` Bernoulli(`probs`) trials: C(n, k) p^k (1 - p)^(n - k).

    Args:
        total_count (int or Tensor): the number of trials, >= 0. Default: 1.
        probs (float or Tensor, optional): the success probability, in [0, 1].
        logits (float or Tensor, optional): its log-odds.
    """

    def __init__(self, total_count: Any = 1, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        value = _one_of(probs, logits)
        count = _count(total_count, value)
        shape = broadcast_shapes(count.shape, value.shape, "Binomial")
        super().__init__(shape, (), validate_args)
        self._check("total_count", count, (count >= 0) & (count == count.floor()), "IntegerGreaterThan(lower_bound=0)")
        self.total_count = count.expand(shape)
        _binary_parameters(self, value.expand(shape), probs is not None)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.probs

    @property
    def mode(self) -> Tensor:
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with grad_mode.no_grad():
            n = np.broadcast_to(self.total_count.numpy().astype(np.int64), self.batch_shape)
            p = np.broadcast_to(self.probs.numpy().astype(np.float64), self.batch_shape)
            drawn = _host_generator().binomial(n, p, size=shape)
        return tensor(np.asarray(drawn, dtype=np.float32), device=self.probs.device)

    def log_prob(self, value: Any) -> Tensor:
        value = self._value(value).float()
        n = self.total_count
        self._check("value", value, (value >= 0) & (value == value.floor()) & (value <= n),
                    f"IntegerInterval(lower_bound=0, upper_bound={n})")
        # k log p + (n - k) log(1 - p) = k logits - n log(1 + e^logits) = k logits - n (max(logits, 0) +
        # log1p(e^-|logits|)), max(l, 0) written so that its gradient at 0 is 1/2 (the true derivative there)
        logits = self.logits
        positive_part = (logits.clamp(min=0) + logits - logits.clamp(max=0)) * 0.5
        log_normalizer = n * positive_part + n * log1p((-logits.abs()).exp())
        return lgamma(n + 1) - lgamma(value + 1) - lgamma(n - value + 1) + value * logits - log_normalizer

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """0, 1, ..., n along a new first dim (one total_count for the whole batch, as PyTorch)."""
        counts = self.total_count.numpy()
        if counts.size and not (counts == counts.flat[0]).all():
            raise NotImplementedError("Inhomogeneous total count not supported by `enumerate_support`.")
        n = int(counts.flat[0]) if counts.size else 0
        values = arange(n + 1, dtype=self.probs.dtype, device=self.probs.device)
        values = values.reshape((-1,) + (1,) * len(self.batch_shape))
        return values.expand((-1,) + self.batch_shape) if expand else values

    def entropy(self) -> Tensor:
        support = self.enumerate_support(expand=False)
        log_prob = self.log_prob(support)
        return -(log_prob.exp() * log_prob).sum(0)


class Multinomial(Distribution):
    """Counts of K categories in `total_count` Categorical(`probs`) draws (the event shape is (K,)).

    Args:
        total_count (int): the number of draws. Default: 1.
        probs (Tensor, optional): non-negative weights of the categories. logits (Tensor, optional): their
            unnormalized log-probabilities.
    """

    def __init__(self, total_count: int = 1, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        if not isinstance(total_count, (int, np.integer)) or isinstance(total_count, bool):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = int(total_count)
        self._categorical = Categorical(probs, logits, validate_args)
        super().__init__(self._categorical.batch_shape, (self._categorical._num_events,), validate_args)

    probs = property(lambda self: self._categorical.probs)
    logits = property(lambda self: self._categorical.logits)
    mean = property(lambda self: self.probs * self.total_count)
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        draws = self._categorical.sample((self.total_count,) + tuple(sample_shape))
        return one_hot(draws, self.event_shape[0]).to(self.probs.dtype).sum(0)

    def log_prob(self, value: Any) -> Tensor:
        value = self._value(value).float()
        counts = ((value >= 0) & (value == value.floor())).all(-1)
        self._check("value", value, counts & (value.sum(-1) <= self.total_count),
                    f"IntegerInterval(lower_bound=0, upper_bound={self.total_count})")
        # a category of probability 0 counted 0 times adds 0 (not 0 * -inf)
        log_powers = (self.logits.clamp(min=-3.4028234663852886e38) * value).sum(-1)
        return lgamma(value.sum(-1) + 1) - lgamma(value + 1).sum(-1) + log_powers

    def entropy(self) -> Tensor:
        """-log n! - n sum_i p_i log p_i + sum_i E[log k_i!], k_i ~ Binomial(n, p_i)."""
        n = float(self.total_count)
        marginals = Binomial(n, self.probs)
        support = marginals.enumerate_support(expand=False)[1:]
        expected_log_factorial = (marginals.log_prob(support).exp() * lgamma(support + 1)).sum(0).sum(-1)
        return n * self._categorical.entropy() - float(lgamma(tensor(n + 1)).item()) + expected_log_factorial
