"""`ggrad.special`: PyTorch's torch.special namespace, for the functions ggrad computes.

Bessel functions, orthogonal polynomials, zeta, polygamma, ndtri, erfcx and i0/i1 are not here: GGML has
no op for them and they are not composed yet.
"""

from .autograd.boundary import guard as _guard
from .autograd.ops import (digamma, entr, erf, erfc, erfinv, exp2, expm1, igamma as gammainc, igammac as gammaincc,
                           lgamma as gammaln, log1p, log_ndtr, log_softmax, logit, logsumexp, multigammaln, ndtr,
                           round, sigmoid as expit, sinc, softmax, xlog1py, xlogy)

psi = digamma

__all__ = ["digamma", "entr", "erf", "erfc", "erfinv", "exp2", "expit", "expm1", "gammainc", "gammaincc", "gammaln",
           "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp", "multigammaln", "ndtr", "psi", "round", "sinc",
           "softmax", "xlog1py", "xlogy"]

_guard(globals(), __all__, prefix="special.")   # a non-Tensor input raises TypeError naming the function
