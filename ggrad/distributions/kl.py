"""`kl_divergence(p, q)` and `register_kl`: KL(p || q) by a formula registered for the pair of types, as
PyTorch's torch.distributions.kl; a pair without one raises NotImplementedError, as PyTorch's does."""

from __future__ import annotations

import math
from typing import Any, Callable

from ..autograd import Tensor
from ..autograd.ops import digamma, lgamma, softplus, where
from ..triangular import solve_triangular
from .beta import Beta
from .continuous import Normal, Uniform
from .discrete import Bernoulli, Categorical
from .gamma import Gamma
from .multivariate_normal import MultivariateNormal, half_log_det, mahalanobis
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


@register_kl(Gamma, Gamma)
def _gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = lgamma(q.concentration) - lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Beta, Beta)
def _beta_beta(p, q):
    p_total, q_total = p.concentration1 + p.concentration0, q.concentration1 + q.concentration0
    t1 = lgamma(q.concentration1) + lgamma(q.concentration0) + lgamma(p_total)
    t2 = lgamma(p.concentration1) + lgamma(p.concentration0) + lgamma(q_total)
    t3 = (p.concentration1 - q.concentration1) * digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * digamma(p.concentration0)
    t5 = (q_total - p_total) * digamma(p_total)
    return t1 - t2 + t3 + t4 + t5


@register_kl(MultivariateNormal, MultivariateNormal)
def _mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot be "
                         "computed")
    p_L, q_L = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    spread = solve_triangular(q_L, p_L, upper=False)
    trace = (spread * spread).sum((-2, -1))
    return half_log_det(q_L) - half_log_det(p_L) + 0.5 * (trace + mahalanobis(q_L, q.loc - p.loc) - p.event_shape[0])
