"""Transforms and `TransformedDistribution` (PyTorch's torch.distributions.transforms): a base distribution's
draws pushed through bijections, its log_prob corrected by their log |det Jacobian|, as SAC's tanh-squashed
Gaussian policy uses them.

The transforms here are elementwise (event_dim 0): ExpTransform, AffineTransform, SigmoidTransform,
TanhTransform, SoftplusTransform, and ComposeTransform of them. With `cache_size=1` a transform remembers its
last (x, y) pair, so inverting the y it just produced returns that x exactly (atanh of a tanh near +-1 would
not), as PyTorch's.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..autograd import Tensor
from ..autograd.ops import atanh, log1p, sigmoid, softplus, tanh
from .distribution import Distribution

__all__ = ["Transform", "ExpTransform", "AffineTransform", "SigmoidTransform", "TanhTransform", "SoftplusTransform",
           "ComposeTransform", "TransformedDistribution"]

_EPS = float(np.finfo(np.float32).eps)
_TINY = float(np.finfo(np.float32).tiny)


class Transform:
    """A bijection y = f(x) with its inverse and log |dy/dx| (PyTorch's Transform); `inv` is the inverse
    transform. Subclasses define _call, _inverse and log_abs_det_jacobian."""

    bijective, sign, event_dim = True, 1, 0

    def __init__(self, cache_size: int = 0) -> None:
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size, self._cached = cache_size, None

    def __call__(self, x: Tensor) -> Tensor:
        y = self._call(x)
        if self._cache_size:
            self._cached = (x, y)
        return y

    def _inv_call(self, y: Tensor) -> Tensor:
        if self._cached is not None and self._cached[1] is y:
            return self._cached[0]
        x = self._inverse(y)
        if self._cache_size:
            self._cached = (x, y)
        return x

    @property
    def inv(self) -> Transform:
        return _InverseTransform(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _InverseTransform(Transform):
    def __init__(self, transform: Transform) -> None:
        super().__init__()
        self._inv, self.sign, self.event_dim = transform, transform.sign, transform.event_dim

    @property
    def inv(self) -> Transform:
        return self._inv

    def __call__(self, y: Tensor) -> Tensor:
        return self._inv._inv_call(y)

    def log_abs_det_jacobian(self, y: Tensor, x: Tensor) -> Tensor:
        return -self._inv.log_abs_det_jacobian(x, y)


class ExpTransform(Transform):
    """y = exp(x)."""

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class AffineTransform(Transform):
    """y = loc + scale * x (loc and scale tensors or numbers)."""

    def __init__(self, loc: Any, scale: Any, event_dim: int = 0, cache_size: int = 0) -> None:
        super().__init__(cache_size)
        self.loc, self.scale, self.event_dim = loc, scale, event_dim

    @property
    def sign(self):
        return self.scale.sign() if isinstance(self.scale, Tensor) else (1 if self.scale > 0 else -1)

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        if isinstance(self.scale, Tensor):
            result = self.scale.abs().log().expand(x.shape)
        else:
            result = x * 0.0 + math.log(abs(self.scale))
        return result.sum(tuple(range(-self.event_dim, 0))) if self.event_dim else result


class SigmoidTransform(Transform):
    """y = 1 / (1 + exp(-x))."""

    def _call(self, x):
        return sigmoid(x)

    def _inverse(self, y):
        y = y.clamp(_TINY, 1.0 - _EPS)
        return y.log() - log1p(-y)

    def log_abs_det_jacobian(self, x, y):
        return -softplus(-x) - softplus(x)


class TanhTransform(Transform):
    """y = tanh(x); log |dy/dx| = 2 (log 2 - x - softplus(-2x)), stable for large |x|."""

    def _call(self, x):
        return tanh(x)

    def _inverse(self, y):
        return atanh(y)

    def log_abs_det_jacobian(self, x, y):
        return 2.0 * (math.log(2.0) - x - softplus(-2.0 * x))


class SoftplusTransform(Transform):
    """y = log(1 + exp(x))."""

    def _call(self, x):
        return softplus(x)

    def _inverse(self, y):
        return y + (-(-y).expm1()).log()

    def log_abs_det_jacobian(self, x, y):
        return -softplus(-x)


class ComposeTransform(Transform):
    """The transforms applied in order: y = parts[-1](... parts[0](x))."""

    def __init__(self, parts: Sequence[Transform], cache_size: int = 0) -> None:
        super().__init__(cache_size)
        self.parts = list(parts)
        self.event_dim = max((p.event_dim for p in self.parts), default=0)

    def _call(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def _inverse(self, y):
        for part in reversed(self.parts):
            y = part.inv(y)
        return y

    def log_abs_det_jacobian(self, x, y):
        total = 0.0
        for part in self.parts:
            following = part(x)
            total = total + part.log_abs_det_jacobian(x, following)
            x = following
        return total


def _sum_rightmost(value, n):
    return value.sum(tuple(range(-n, 0))) if n > 0 else value


class TransformedDistribution(Distribution):
    """`base_distribution`'s draws pushed through `transforms` (one Transform or a list, applied in order).

    log_prob(y) = base.log_prob(x) - sum of log |det J| along the way back from y to x.
    """

    def __init__(self, base_distribution: Distribution, transforms: Transform | Sequence[Transform],
                 validate_args: bool | None = None) -> None:
        self.base_dist = base_distribution
        self.transforms = [transforms] if isinstance(transforms, Transform) else list(transforms)
        for t in self.transforms:
            if not isinstance(t, Transform):
                raise ValueError(f"transforms must be a Transform or a list of Transforms, but was {transforms}")
        super().__init__(base_distribution.batch_shape, base_distribution.event_shape, validate_args)

    @property
    def has_rsample(self) -> bool:
        return self.base_dist.has_rsample

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        x = self.base_dist.sample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        x = self.base_dist.rsample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def log_prob(self, value: Any) -> Tensor:
        y = self._value(value)
        event_dim = len(self.event_shape)
        total = 0.0
        for t in reversed(self.transforms):
            x = t.inv(y)
            total = total - _sum_rightmost(t.log_abs_det_jacobian(x, y), event_dim - t.event_dim)
            y = x
        return total + _sum_rightmost(self.base_dist.log_prob(y), event_dim - len(self.base_dist.event_shape))

    def cdf(self, value: Any) -> Tensor:
        y = self._value(value)
        for t in reversed(self.transforms):
            y = t.inv(y)
        result = self.base_dist.cdf(y)
        sign = 1
        for t in self.transforms:
            sign = sign * t.sign
        return result if isinstance(sign, int) and sign == 1 else sign * (result - 0.5) + 0.5

    def __repr__(self) -> str:
        return f"TransformedDistribution({self.base_dist!r}, {self.transforms!r})"
