"""`ggrad.distributions` (PyTorch's torch.distributions): Normal, Uniform, Bernoulli, Categorical, Beta, Gamma,
MultivariateNormal, Chi2, Exponential, Laplace, Cauchy, Gumbel, LogNormal, HalfNormal, Geometric,
OneHotCategorical, Poisson, Binomial, Multinomial, Dirichlet, StudentT, Independent, MixtureSameFamily and
TransformedDistribution (with the elementwise transforms) with sample, rsample (the continuous ones), log_prob,
entropy, mean and variance, and kl_divergence between two of a kind. Beta and Gamma stand on ggrad's lgamma/digamma and a
Marsaglia-Tsang sampler with implicit gradients; MultivariateNormal on ggrad's composed Cholesky (small event
sizes)."""

from .beta import Beta
from .continuous import Normal, Uniform
from .counts import Binomial, Multinomial
from .dirichlet import Dirichlet, StudentT
from .discrete import Bernoulli, Categorical, Geometric, OneHotCategorical, Poisson
from .distribution import Distribution
from .gamma import Chi2, Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .mixture import MixtureSameFamily
from .multivariate_normal import MultivariateNormal
from .transformed_draws import Cauchy, Exponential, Gumbel, HalfNormal, Laplace, LogNormal
from .transforms import (AffineTransform, ComposeTransform, ExpTransform, SigmoidTransform, SoftplusTransform,
                         TanhTransform, Transform, TransformedDistribution)

__all__ = ["Distribution", "Normal", "Uniform", "Bernoulli", "Categorical", "Beta", "Gamma", "MultivariateNormal",
           "Chi2", "Exponential", "Laplace", "Cauchy", "Gumbel", "LogNormal", "HalfNormal", "Geometric",
           "OneHotCategorical", "Poisson", "Independent", "Dirichlet", "StudentT", "TransformedDistribution",
           "Transform", "ExpTransform", "AffineTransform", "SigmoidTransform", "TanhTransform", "SoftplusTransform",
           "ComposeTransform", "kl_divergence", "register_kl", "Binomial", "Multinomial", "MixtureSameFamily"]
