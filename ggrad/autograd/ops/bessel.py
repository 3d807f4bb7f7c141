"""Modified Bessel functions of the first kind, i0, i1 and their exponentially scaled forms i0e, i1e (PyTorch's
torch.i0 and torch.special.i0 / i0e / i1 / i1e), composed from GGML's elementwise ops.

Up to |x| = 15 the power series sum_k (x^2 / 4)^k / (k! (k + nu)!) (times (x/2)^nu), 40 terms by Horner's rule
(the terms are all positive: no cancellation); above, the asymptotic expansion e^x / sqrt(2 pi x) *
sum_k (-1)^k a_k(nu) / x^k, a_k(nu) = prod_{j<=k} (4 nu^2 - (2j - 1)^2) / (k! 8^k), 12 terms (the terms still
fall at x = 15). Within ~1e-6 relatively of PyTorch's float32 over the float32 range. Gradients as PyTorch's:
i0' = i1, i1' = i0 - i1 / x (1/2 at 0), and the scaled forms' with their -sign(x) y terms.
"""

import math

from . import unary as un
from .math import float_math, nan_carrier
from .selection import where
from ..declaration import declare

_SWITCH = 15.0
_SERIES_TERMS = 40
_ASYMPTOTIC_TERMS = 12


def _asymptotic_coefficients(nu):
    coefficients, c = [1.0], 1.0
    for k in range(1, _ASYMPTOTIC_TERMS):
        c *= -(4 * nu * nu - (2 * k - 1) ** 2) / (k * 8)
        coefficients.append(c)
    return coefficients


_ASYMPTOTIC = {nu: _asymptotic_coefficients(nu) for nu in (0, 1)}


def _series(ax, nu):
    """sum_k q^k / (k! (k + nu)!) with q = x^2 / 4, nested as 1 + q/(1 (1+nu)) (1 + q/(2 (2+nu)) (...))."""
    q = ax * ax * 0.25
    total = q * 0.0 + 1.0
    for k in range(_SERIES_TERMS, 0, -1):
        total = total * q * (1.0 / (k * (k + nu))) + 1.0
    return total if nu == 0 else total * ax * 0.5


def _scaled_asymptotic(ax, nu):
    """e^-x I_nu(x) for x >= _SWITCH: sum_k c_k / x^k / sqrt(2 pi x)."""
    u = 1.0 / ax
    total = u * 0.0
    for c in reversed(_ASYMPTOTIC[nu]):
        total = total * u + c
    return total / (ax * (2.0 * math.pi)).sqrt()


def _branches(x, nu):
    """(|x| within the series' range, |x| clamped into it, |x| clamped above it, series, scaled asymptotic)."""
    ax = un.abs(x)
    small = ax <= _SWITCH
    near, far = un.Clamp.apply(ax, 0.0, _SWITCH), un.Clamp.apply(ax, _SWITCH, math.inf)
    return ax, small, near, far, _series(near, nu), _scaled_asymptotic(far, nu)


def _unscaled(x, nu):
    ax, small, near, far, series, scaled = _branches(x, nu)
    large = far.exp() * scaled   # inf from |x| = 88.7 on and nan at +-inf, as PyTorch's float32
    return where(small, series, large) + nan_carrier(x)


def _scaled(x, nu):
    ax, small, near, far, series, scaled = _branches(x, nu)
    return where(small, series * (-near).exp(), scaled) + nan_carrier(x)


def _at_zero(x, value, elsewhere):
    zero = x == 0
    return where(zero, value, elsewhere(where(zero, 1.0, x)))


i0 = float_math("I0", lambda x: _unscaled(x, 0), lambda x, y: i1(x), "y = I0(x), the modified Bessel function of "
                "the first kind of order 0")
declare(i0, method=True, inplace=True)
i0e = float_math("I0e", lambda x: _scaled(x, 0), lambda x, y: i1e(x) - un.Sgn.apply(x) * y,
                 "y = e^-|x| I0(x), the exponentially scaled I0")
i1 = float_math("I1", lambda x: un.Sgn.apply(x) * _unscaled(x, 1),
                lambda x, y: _at_zero(x, 0.5, lambda s: i0(s) - y / s),
                "y = I1(x), the modified Bessel function of the first kind of order 1")
i1e = float_math("I1e", lambda x: un.Sgn.apply(x) * _scaled(x, 1),
                 lambda x, y: _at_zero(x, 0.5, lambda s: i0e(s) - y * (un.Sgn.apply(s) + 1.0 / s)),
                 "y = e^-|x| I1(x), the exponentially scaled I1")
