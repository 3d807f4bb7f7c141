"""MixtureSameFamily: a Categorical mixture of the components of one batched distribution (PyTorch's
torch.distributions.MixtureSameFamily)."""

from __future__ import annotations

from typing import Any, Sequence

from ..autograd import Tensor, grad_mode
from ..autograd.ops import gather, log_softmax, logsumexp
from .discrete import Categorical
from .distribution import Distribution

__all__ = ["MixtureSameFamily"]


class MixtureSameFamily(Distribution):
    """p(x) = sum_k pi_k p_k(x): `mixture_distribution` (a Categorical over K) picks one of the K components,
    the last batch dim of `component_distribution`.

    Args:
        mixture_distribution (Categorical): the mixing weights, batch shape B.
        component_distribution (Distribution): the components, batch shape B + (K,).
    """

    def __init__(self, mixture_distribution: Categorical, component_distribution: Distribution,
                 validate_args: bool | None = None) -> None:
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an  instance of torch.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution need to be an instance of torch.distributions.Distribution")
        mixture_batch, component_batch = mixture_distribution.batch_shape, component_distribution.batch_shape
        if not component_batch:
            raise ValueError("`component_distribution` must have at least one batch dimension")
        for size1, size2 in zip(reversed(mixture_batch), reversed(component_batch[:-1])):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise ValueError(f"`mixture_distribution.batch_shape` ({mixture_batch}) is not compatible with "
                                 f"`component_distribution.batch_shape`({component_batch})")
        k = mixture_distribution._num_events
        if k != component_batch[-1]:
            raise ValueError(f"`mixture_distribution component` ({k}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({component_batch[-1]})")
        self._mixture_distribution, self._component_distribution = mixture_distribution, component_distribution
        self._num_component, self._event_ndims = k, len(component_distribution.event_shape)
        super().__init__(component_batch[:-1], component_distribution.event_shape, validate_args)

    mixture_distribution = property(lambda self: self._mixture_distribution)
    component_distribution = property(lambda self: self._component_distribution)

    def _weights(self):
        """The mixing probabilities with a trailing 1 for each event dim (to weigh the components' moments)."""
        probs = self._mixture_distribution.probs
        return probs.reshape(tuple(probs.shape) + (1,) * self._event_ndims)

    @property
    def mean(self) -> Tensor:
        return (self._weights() * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self) -> Tensor:
        """The law of total variance: E[Var(x | k)] + Var(E[x | k])."""
        weights, dim = self._weights(), -1 - self._event_ndims
        means = self._component_distribution.mean
        mean_of_variances = (weights * self._component_distribution.variance).sum(dim)
        spread = means - self.mean.unsqueeze(dim)
        return mean_of_variances + (weights * spread * spread).sum(dim)

    def log_prob(self, value: Any) -> Tensor:
        x = self._value(value).unsqueeze(-1 - self._event_ndims)   # against every component
        log_prob_x = self._component_distribution.log_prob(x)
        return logsumexp(log_prob_x + log_softmax(self._mixture_distribution.logits, -1), -1)

    def cdf(self, value: Any) -> Tensor:
        x = self._value(value).unsqueeze(-1 - self._event_ndims)
        return (self._component_distribution.cdf(x) * self._mixture_distribution.probs).sum(-1)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        with grad_mode.no_grad():
            picks = self._mixture_distribution.sample(sample_shape)            # sample + B
            drawn = self._component_distribution.sample(sample_shape)          # sample + B + (K,) + event
            dim = len(tuple(sample_shape)) + len(self.batch_shape)
            index = picks.reshape(tuple(picks.shape) + (1,) * (1 + self._event_ndims))
            index = index.expand(tuple(drawn.shape[:dim]) + (1,) + tuple(drawn.shape[dim + 1:]))
            return gather(drawn, dim, index.long()).squeeze(dim)

    def __repr__(self) -> str:
        return (f"MixtureSameFamily(\n  {self._mixture_distribution},\n  {self._component_distribution})")
