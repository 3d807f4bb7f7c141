"""`ggrad.special`: PyTorch's torch.special namespace, for the functions ggrad computes.

Bessel functions of the first and second kind (bessel_j0, ...), the orthogonal polynomials, erfcx, airy_ai and
the spherical Bessel function are not here: GGML has no op for them and they are not composed yet.
"""

from .autograd.boundary import guard as _guard
from .autograd.ops import (digamma, entr, erf, erfc, erfinv, exp2, expm1, i0, igamma as gammainc,
                           igammac as gammaincc, lgamma as gammaln, log1p, log_ndtr, log_softmax, logit, logsumexp,
                           multigammaln, ndtr, ndtri, polygamma, round, sigmoid as expit, sinc, softmax, xlog1py, xlogy,
                           zeta)
from .autograd.ops.bessel import i0e, i1, i1e

psi = digamma

__all__ = ["digamma", "entr", "erf", "erfc", "erfinv", "exp2", "expit", "expm1", "gammainc", "gammaincc", "gammaln",
           "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp", "multigammaln", "ndtr",
           "ndtri", "polygamma", "psi", "round", "sinc", "softmax", "xlog1py", "xlogy", "zeta"]

_guard(globals(), __all__, prefix="special.")   # a non-Tensor input raises TypeError naming the function
