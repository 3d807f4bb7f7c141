"""`ggrad.distributions` (PyTorch's torch.distributions): Normal, Uniform, Bernoulli, Categorical with sample,
rsample (Normal, Uniform), log_prob, entropy, mean and variance, and kl_divergence between two of a kind.

Beta, Gamma and MultivariateNormal need lgamma/digamma or a Cholesky factorization, which GGML has not:
they are not here."""

from .continuous import Normal, Uniform
from .discrete import Bernoulli, Categorical
from .distribution import Distribution
from .kl import kl_divergence, register_kl

__all__ = ["Distribution", "Normal", "Uniform", "Bernoulli", "Categorical", "kl_divergence", "register_kl"]
