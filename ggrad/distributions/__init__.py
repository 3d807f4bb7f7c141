"""`ggrad.distributions` (PyTorch's torch.distributions): Normal, Uniform, Bernoulli, Categorical, Beta, Gamma
and MultivariateNormal with sample, rsample (the continuous ones), log_prob, entropy, mean and variance, and
kl_divergence between two of a kind. Beta and Gamma stand on ggrad's lgamma/digamma and a Marsaglia-Tsang
sampler with implicit gradients; MultivariateNormal on ggrad's composed Cholesky (small event sizes)."""

from .beta import Beta
from .continuous import Normal, Uniform
from .discrete import Bernoulli, Categorical
from .distribution import Distribution
from .gamma import Gamma
from .kl import kl_divergence, register_kl
from .multivariate_normal import MultivariateNormal

__all__ = ["Distribution", "Normal", "Uniform", "Bernoulli", "Categorical", "Beta", "Gamma", "MultivariateNormal",
           "kl_divergence", "register_kl"]
