"""`Distribution`: the base of ggrad's probability distributions (PyTorch's torch.distributions.Distribution).

A distribution has a `batch_shape` (independent distributions side by side) and an `event_shape` (the shape of
one draw); `sample(sample_shape)` draws without gradient, `rsample` (where the distribution has it) draws
differentiably by reparameterization, `log_prob`, `entropy`, `mean`, `variance` and `stddev` are tensors of
the batch shape. Parameters are checked as PyTorch checks them when `validate_args` is on (the default).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..autograd import Tensor, grad_mode
from ..autograd.factory import tensor

__all__ = ["Distribution"]

_validate_default = [True]


class Distribution:
    """The base class: subclasses define rsample or sample, log_prob, entropy, mean and variance."""

    has_rsample = False

    def __init__(self, batch_shape: Sequence[int] = (), event_shape: Sequence[int] = (),
                 validate_args: bool | None = None) -> None:
        self._batch_shape, self._event_shape = tuple(batch_shape), tuple(event_shape)
        self._validate_args = _validate_default[0] if validate_args is None else validate_args

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Check parameters and values by default (True, as PyTorch) or not."""
        _validate_default[0] = bool(value)

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self._batch_shape

    @property
    def event_shape(self) -> tuple[int, ...]:
        return self._event_shape

    def _extended_shape(self, sample_shape: Sequence[int] = ()) -> tuple[int, ...]:
        return tuple(sample_shape) + self._batch_shape + self._event_shape

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        """A draw of shape sample_shape + batch_shape + event_shape, recording no gradient."""
        with grad_mode.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized sampler (rsample); use sample()")

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def _check(self, name: str, value: Any, ok: Tensor, constraint: str) -> None:
        """PyTorch's ValueError where `ok` (a bool tensor over the parameter) is not everywhere true."""
        if self._validate_args and not bool(ok.all().item()):
            raise ValueError(f"Expected parameter {name} ({type(value).__name__} of shape {tuple(value.shape)}) of "
                             f"distribution {self!r} to satisfy the constraint {constraint}, but found invalid "
                             f"values:\n{value}")

    def _value(self, value: Any) -> Tensor:
        return value if isinstance(value, Tensor) else tensor(value)

    def __repr__(self) -> str:
        names = [n for n in ("loc", "scale", "probs", "low", "high") if n in self.__dict__]
        shown = ", ".join(f"{n}: {tuple(self.__dict__[n].shape) if self.__dict__[n].ndim else self.__dict__[n]}"
                          for n in names)
        return f"{type(self).__name__}({shown})"
