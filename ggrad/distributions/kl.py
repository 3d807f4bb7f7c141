"""`kl_divergence(p, q)` and `register_kl`: KL(p || q) by a formula registered for the pair of types, as
PyTorch's torch.distributions.kl; a pair without one raises NotImplementedError, as PyTorch's does."""

from __future__ import annotations

import math
from typing import Any, Callable

from ..autograd import Tensor
from ..autograd.ops import softplus, where
from .continuous import Normal, Uniform
from .discrete import Bernoulli, Categorical
from .distribution import Distribution

__all__ = ["kl_divergence", "register_kl"]

_REGISTRY: dict[tuple[type, type], Callable[[Any, Any], Tensor]] = {}


def register_kl(type_p: type, type_q: type) -> Callable[[Callable[[Any, Any], Tensor]], Callable[[Any, Any], Tensor]]:
    """A decorator: `@register_kl(P, Q)` makes the function KL(p || q) for p a P and q a Q."""
    def register(fn):
        _REGISTRY[(type_p, type_q)] = fn
        return fn
    return register


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """KL(p || q) of the batch, by the formula registered for the most specific pair of their types."""
    for type_p in type(p).__mro__:
        for type_q in type(q).__mro__:
            if (type_p, type_q) in _REGISTRY:
                return _REGISTRY[(type_p, type_q)](p, q)
    raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
                              f"{type(q).__name__}")


@register_kl(Normal, Normal)
def _normal_normal(p, q):
    var_ratio = (p.scale / q.scale) ** 2
    t1 = ((p.loc - q.loc) / q.scale) ** 2
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _bernoulli_bernoulli(p, q):
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = where(p.probs == 0, 0.0, where(q.probs == 0, math.inf, t1))
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = where(p.probs == 1, 0.0, where(q.probs == 1, math.inf, t2))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = where(p.probs == 0, 0.0, where(q.probs == 0, math.inf, t))
    return t.sum(-1)


@register_kl(Uniform, Uniform)
def _uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return where((q.low > p.low) | (q.high < p.high), math.inf, result)
