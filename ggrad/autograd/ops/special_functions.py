"""PyTorch's special functions that are compositions of ggrad's ops: logit, xlogy, xlog1py, sinc, entr, ndtr,
log_ndtr and multigammaln (torch.special's, and torch.logit / xlogy / sinc at the top level).

Each is differentiable through the ops it is made of. Where a branch would be nan or infinite outside the
points it is selected at (log of 0, 0/0), its input is first moved to a harmless value there, so that the
unselected branch cannot turn a gradient into nan.
"""

import math
import numbers

from ..dtype_rules import promote
from ..function import Function
from ..tensor import Tensor
from . import unary as un
from .broadcast import broadcast_shapes, expand_to
from .gamma_functions import lgamma
from .math import erfc, float_math, log1p, nan_carrier
from .selection import where
from ..declaration import declare

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_ASYMPTOTIC_BELOW = -10.0   # log_ndtr's asymptotic series from here down (5 terms: within 1e-8)


def _float(x, name):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(x).__name__}")
    return x if x.dtype.is_float else x.float()


@declare(method=True)
def logit(input, eps=None):  # noqa: A002 (PyTorch's names)
    """log(p / (1 - p)); with `eps`, p is first clamped to [eps, 1 - eps] (gradient 0 outside)."""
    p = _float(input, "logit")
    if eps is not None and not isinstance(eps, numbers.Real):
        raise TypeError(f"logit(): argument 'eps' must be float, not {type(eps).__name__}")
    if eps is not None:
        p = p.clamp(eps, 1.0 - eps)
    return un.Log.apply(p) - log1p(-p)


class _XLog(Function):
    """x log(y + shift) (shift 0: xlogy, 1: xlog1py), 0 where x is 0, nan where y is nan; PyTorch's gradients:
    log(y + shift) in x (0 where x is 0 and y + shift <= 0), x / (y + shift) in y."""

    @staticmethod
    def forward(ctx, x, y, shift):
        ctx.save_for_backward(x, y)
        ctx.shift = shift
        zero = x == 0
        value = where(zero, 0.0, x * un.Log.apply(where(zero, 1.0, y + shift)))
        return where(un.IsNan.apply(y) > 0, y, value)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        moved = y + ctx.shift
        return g * where((x == 0) & (moved <= 0), 0.0, un.Log.apply(moved)), g * x / moved, None


def _xlog(name, shift, input, other):
    x, y = promote(input, other, name)
    if not x.dtype.is_float:
        x, y = x.float(), y.float()
    shape = broadcast_shapes(x.shape, y.shape, name)
    return _XLog.apply(expand_to(x, shape), expand_to(y, shape), shift)


@declare(method=True)
def xlogy(input, other):  # noqa: A002
    """x log y, 0 where x is 0 (nan where y is nan), as PyTorch's; one of the two may be a number."""
    return _xlog("xlogy", 0.0, input, other)


@declare()
def xlog1py(input, other):  # noqa: A002
    """x log(1 + y), 0 where x is 0 (nan where y is nan)."""
    return _xlog("xlog1py", 1.0, input, other)


@declare(method=True)
def sinc(input):  # noqa: A002
    """sin(pi x) / (pi x), 1 at 0."""
    x = _float(input, "sinc")
    zero = x == 0
    pix = where(zero, 1.0, x * math.pi)
    return where(zero, 1.0, un.Sin.apply(pix) / pix)


def _entr(x):
    positive = x > 0
    safe = where(positive, x, 1.0)
    inside = where(x == 0, 0.0, where(positive, -(safe * un.Log.apply(safe)), float("-inf")))
    return where(un.IsNan.apply(x) > 0, x, inside)


entr = float_math("Entr", _entr, lambda x, y: -(un.Log.apply(x) + 1.0),
                  "y = -x log x for x > 0, 0 at 0, -inf below (nan stays nan); gradient -(1 + log x)")
declare(entr)


@declare()
def ndtr(input):  # noqa: A002
    """The standard normal CDF, (1 + erf(x / sqrt 2)) / 2, relatively accurate in both tails (erfc's)."""
    x = _float(input, "ndtr")
    return erfc(x * -math.sqrt(0.5)) * 0.5


@declare()
def log_ndtr(input):  # noqa: A002
    """log of the standard normal CDF: log1p(-ndtr(-x)) above 0, log(ndtr(x)) down to -10, and below the
    asymptotic series -x^2/2 - log(-x) - log(2 pi)/2 + log(1 - 1/x^2 + 3/x^4 - 15/x^6 + 105/x^8 - 945/x^10)."""
    x = _float(input, "log_ndtr")
    upper = un.Clamp.apply(x, 0.0, float("inf"))
    middle = un.Clamp.apply(x, _ASYMPTOTIC_BELOW, 0.0)
    lower = un.Clamp.apply(x, float("-inf"), _ASYMPTOTIC_BELOW)
    inverse = 1.0 / (lower * lower)
    series = ((((inverse * -945.0 + 105.0) * inverse - 15.0) * inverse + 3.0) * inverse - 1.0) * inverse
    asymptotic = lower * lower * -0.5 - un.Log.apply(-lower) - _LOG_SQRT_2PI + log1p(series)
    return where(x > 0, log1p(-ndtr(-upper)),
                 where(x >= _ASYMPTOTIC_BELOW, un.Log.apply(ndtr(middle)), asymptotic))


def _ndtri_lower(q):
    """ndtri for q in (0, 1/2]: Abramowitz and Stegun's rational start (26.2.23, within 4.5e-4) in
    t = sqrt(-2 log q), then two Newton steps on log_ndtr(y) = log q (quadratic: float32 accuracy from the
    centre to q = 1e-38, where 2q - 1 would have rounded q away)."""
    log_q = un.Log.apply(un.Clamp.apply(q, 1e-38, 0.5))
    t = (log_q * -2.0).sqrt()
    y = (2.515517 + t * (0.802853 + t * 0.010328)) / (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))) - t
    for _ in range(2):
        log_cdf = log_ndtr(y)
        y = y - (log_cdf - log_q) * un.Exp.apply(log_cdf + y * y * 0.5 + _LOG_SQRT_2PI)
    return y


def _ndtri(p):
    upper = p > 0.5
    y = _ndtri_lower(where(upper, 1.0 - p, p))
    y = where(upper, -y, y)
    return where(p == 0, -math.inf, where(p == 1, math.inf, where((p < 0) | (p > 1), math.nan, y))) + nan_carrier(p)


ndtri = float_math("Ndtri", _ndtri, lambda p, y: un.Exp.apply(y * y * 0.5 + _LOG_SQRT_2PI),
                   "y = ndtri p, the inverse of the standard normal CDF (ndtr); gradient sqrt(2 pi) e^(y^2 / 2)")
declare(ndtri)


@declare(method=True, inplace=True, aliases=("mvlgamma",))
def multigammaln(input, p):  # noqa: A002
    """The log of the multivariate gamma function of dimension p: p(p-1)/4 log(pi) + sum_j lgamma(a - j/2),
    j = 0 .. p-1 (inf where an a - j/2 is a pole, as PyTorch's). RuntimeError for p < 1."""
    a = _float(input, "multigammaln")
    if isinstance(p, bool) or not isinstance(p, int):
        raise TypeError(f"mvlgamma(): argument 'p' must be int, not {type(p).__name__}")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    total = lgamma(a)
    for j in range(1, p):
        total = total + lgamma(a - 0.5 * j)
    return total + p * (p - 1) / 4 * math.log(math.pi)
