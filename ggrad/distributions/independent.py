"""`Independent`: a distribution's rightmost batch dimensions read as event dimensions (PyTorch's
torch.distributions.Independent), as a diagonal Normal policy in RL code: log_prob and entropy sum over them."""

from __future__ import annotations

from typing import Any, Sequence

from ..autograd import Tensor
from .distribution import Distribution

__all__ = ["Independent"]


class Independent(Distribution):
    """`base_distribution` with its last `reinterpreted_batch_ndims` batch dimensions made event dimensions.

    Args:
        base_distribution (Distribution): the distribution whose batch dimensions are reinterpreted.
        reinterpreted_batch_ndims (int): how many of its rightmost batch dimensions.
    """

    def __init__(self, base_distribution: Distribution, reinterpreted_batch_ndims: int,
                 validate_args: bool | None = None) -> None:
        batch = base_distribution.batch_shape
        if reinterpreted_batch_ndims > len(batch):
            raise ValueError(f"Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), actual "
                             f"{reinterpreted_batch_ndims} vs {len(batch)}")
        split = len(batch) - reinterpreted_batch_ndims
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, reinterpreted_batch_ndims
        super().__init__(batch[:split], batch[split:] + base_distribution.event_shape, validate_args)

    @property
    def has_rsample(self) -> bool:
        return self.base_dist.has_rsample

    mean = property(lambda self: self.base_dist.mean)
    mode = property(lambda self: self.base_dist.mode)
    variance = property(lambda self: self.base_dist.variance)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        return self.base_dist.rsample(sample_shape)

    def _summed(self, values: Tensor) -> Tensor:
        n = self.reinterpreted_batch_ndims
        return values.sum(tuple(range(-n, 0))) if n else values

    def log_prob(self, value: Any) -> Tensor:
        return self._summed(self.base_dist.log_prob(value))

    def entropy(self) -> Tensor:
        return self._summed(self.base_dist.entropy())

    def __repr__(self) -> str:
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"
