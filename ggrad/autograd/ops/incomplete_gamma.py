"""The regularized incomplete gamma functions: P(a, x) = gamma(a, x) / Gamma(a) and Q(a, x) = 1 - P(a, x)
(PyTorch's torch.igamma / torch.igammac, torch.special.gammainc / gammaincc; Gamma.cdf stands on P).

GGML has no loop, and both need one: they are computed in float64 on the host (a read of the inputs), P by
its power series below x = a + 1 and Q by its continued fraction (modified Lentz) above, each run until
its terms stop changing the sum, so that the smaller of P and Q keeps its relative precision in the tails.
Where neither has converged after 20,000 terms (a above ~1e6 with x within a few sqrt(a) of a, where
both values are moderate) the Wilson-Hilferty normal approximation stands in (absolute error about
4.5e-3 / a). Edge values as PyTorch's: nan for a < 0, x < 0, nan, a = x = 0 and a = x = inf; P(0, x > 0) = 1.

Gradients: in x the density x^(a-1) e^-x / Gamma(a) (evaluated in float64 too, as a constant of the
graph). In a PyTorch has none (its backward raises NotImplementedError); ggrad gives dP/da by a central
difference of the float64 P.
"""

import math

import numpy as np

from ..factory import tensor
from ..function import Function
from ..tensor import Tensor
from .broadcast import broadcast_shapes
from ..declaration import declare

_EPS = 1e-16
_MAX_TERMS = 20_000
_TINY = 1e-300
_lgamma64 = np.vectorize(math.lgamma, otypes=[np.float64])
_erfc64 = np.vectorize(math.erfc, otypes=[np.float64])


def _log_front(a, x):
    """log(x^a e^-x / Gamma(a)), the factor both the series and the continued fraction share."""
    return a * np.log(x) - x - _lgamma64(a)


def _series(a, x):
    """P(a, x) by sum_n x^n / (a (a+1) ... (a+n)); the mask of the elements that converged."""
    term = 1.0 / a
    total = term.copy()
    active = np.ones(a.shape, bool)
    for n in range(1, _MAX_TERMS):
        idx = np.flatnonzero(active)
        if not idx.size:
            break
        term[idx] *= x[idx] / (a[idx] + n)
        total[idx] += term[idx]
        active[idx] = np.abs(term[idx]) > np.abs(total[idx]) * _EPS
    return np.exp(_log_front(a, x)) * total, ~active


def _continued_fraction(a, x):
    """Q(a, x) by its continued fraction (modified Lentz); the mask of the elements that converged."""
    b = x + 1.0 - a
    c = np.full(a.shape, 1.0 / _TINY)
    d = 1.0 / np.where(b == 0, _TINY, b)
    h = d.copy()
    active = np.ones(a.shape, bool)
    for i in range(1, _MAX_TERMS):
        idx = np.flatnonzero(active)
        if not idx.size:
            break
        an = -i * (i - a[idx])
        b[idx] += 2.0
        di = an * d[idx] + b[idx]
        di = 1.0 / np.where(np.abs(di) < _TINY, _TINY, di)
        ci = b[idx] + an / c[idx]
        ci = np.where(np.abs(ci) < _TINY, _TINY, ci)
        delta = di * ci
        d[idx], c[idx], h[idx] = di, ci, h[idx] * delta
        active[idx] = np.abs(delta - 1.0) > _EPS
    return np.exp(_log_front(a, x)) * h, ~active


def _wilson_hilferty(a, x):
    """(P, Q) by the normal approximation of (x / a)^(1/3)."""
    z = ((x / a) ** (1.0 / 3.0) - (1.0 - 1.0 / (9.0 * a))) * np.sqrt(9.0 * a)
    return 0.5 * _erfc64(-z / math.sqrt(2.0)), 0.5 * _erfc64(z / math.sqrt(2.0))


def regularized_gamma(a, x):
    """(P(a, x), Q(a, x)) in float64 for float64 arrays `a` and `x` (broadcast together)."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    p, q = np.full(a.shape, np.nan), np.full(a.shape, np.nan)
    finite = (a > 0) & (x > 0) & np.isfinite(a) & np.isfinite(x)
    edges = (((a > 0) & (x == 0), 0.0), ((a == 0) & (x > 0), 1.0), ((x == np.inf) & (a > 0) & (a < np.inf), 1.0),
             ((a == np.inf) & (x < np.inf) & (x >= 0), 0.0))
    for edge, p_value in edges:
        p[edge], q[edge] = p_value, 1.0 - p_value
    for use_series in (True, False):
        where = finite & ((x < a + 1.0) == use_series)
        if not where.any():
            continue
        aw, xw = a[where], x[where]
        value, done = (_series if use_series else _continued_fraction)(aw, xw)
        other = 1.0 - value
        if not done.all():
            approx_p, approx_q = _wilson_hilferty(aw[~done], xw[~done])
            value[~done], other[~done] = (approx_p, approx_q) if use_series else (approx_q, approx_p)
        p[where], q[where] = (value, other) if use_series else (other, value)
    return p, q


def lower_regularized_gamma(a, x):
    """P(a, x) in float64 (float64 arrays in): what Gamma's sampler and cdf read."""
    return regularized_gamma(a, x)[0]


class _RegularizedGamma(Function):
    """P(a, x) (upper=False) or Q(a, x) (upper=True) of two float tensors of one shape and dtype."""

    @staticmethod
    def forward(ctx, a, x, upper):
        a64, x64 = (t.detach().float().numpy().astype(np.float64) for t in (a, x))
        p, q = regularized_gamma(a64, x64)
        sign = -1.0 if upper else 1.0
        ctx.slope_a = ctx.slope_x = None
        if ctx.needs_input_grad[1]:
            density = np.exp((a64 - 1.0) * np.log(x64) - x64 - _lgamma64(a64))
            ctx.slope_x = _constant(sign * density, x)
        if ctx.needs_input_grad[0]:
            step = 1e-5 * np.maximum(a64, 1e-3)
            dp = (regularized_gamma(a64 + step, x64)[0] - regularized_gamma(np.maximum(a64 - step, 0.0), x64)[0]) / \
                (a64 + step - np.maximum(a64 - step, 0.0))
            ctx.slope_a = _constant(sign * dp, a)
        return _constant(q if upper else p, a)

    @staticmethod
    def backward(ctx, g):
        return (None if ctx.slope_a is None else g * ctx.slope_a,
                None if ctx.slope_x is None else g * ctx.slope_x, None)


def _constant(values, like):
    return tensor(values.astype(np.float32), device=like.device).to(like.dtype)


def _apply(name, input, other, upper):  # noqa: A002
    for arg, value in (("input", input), ("other", other)):
        if not isinstance(value, Tensor):
            raise TypeError(f"{name}(): argument '{arg}' (position {1 + (arg == 'other')}) must be Tensor, "
                            f"not {type(value).__name__}")
    if not (input.dtype.is_float and other.dtype.is_float):
        raise NotImplementedError(f'"{name}_cpu" not implemented for the integer dtypes {input.dtype.torch_name} '
                                  f"and {other.dtype.torch_name}: PyTorch's {name} takes floating point tensors")
    if input.dtype is not other.dtype:
        wide = input.dtype if input.dtype.name == "f32" else other.dtype
        input, other = input.to(wide), other.to(wide)
    shape = broadcast_shapes(input.shape, other.shape, name)
    return _RegularizedGamma.apply(input.expand(shape), other.expand(shape), upper)


@declare(method=True)
def igamma(input, other):  # noqa: A002 (PyTorch's names)
    """P(input, other): the regularized lower incomplete gamma function (broadcast; float tensors)."""
    return _apply("igamma", input, other, False)


@declare(method=True)
def igammac(input, other):  # noqa: A002
    """Q(input, other) = 1 - P(input, other): the regularized upper incomplete gamma function."""
    return _apply("igammac", input, other, True)


__all__ = ["igamma", "igammac"]
