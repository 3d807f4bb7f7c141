"""`lgamma`, `digamma` (PyTorch's torch.lgamma / torch.digamma) and the trigamma their gradients need, composed
of GGML's elementwise ops (GGML has none of them).

Below 1/2 the reflection formulas through sin(pi r), r = x - round(x) (exact for every float32):
lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x), digamma(x) = digamma(1 - x) - pi cot(pi x),
trigamma(x) = pi^2 / sin^2(pi x) - trigamma(1 - x). From 1/2 on:
  - lgamma: for y >= 8 Stirling's series; below 8 the recurrence brings y to u in [2, 3), where
    lgamma(u) = (u - 2) Q(u - 2.5), Q a degree-12 polynomial fitted at import to math.lgamma (float64,
    Chebyshev nodes; within 1e-10), so lgamma keeps its accuracy near its zeros at 1 and 2;
  - digamma and trigamma: their asymptotic series at y + 8 (for y < 8) less / plus the eight terms.
Within a few float32 units of PyTorch's (relatively, or absolutely where |value| < 1). Poles as PyTorch's:
lgamma is inf at 0 and the negative integers; digamma is -inf at 0 and nan at the negative integers.
Gradients: lgamma' = digamma, digamma' = trigamma.
"""

import math as _math

import numpy as _np

from . import unary as un
from .logical import eq, logical_and
from .math import float_math, nan_carrier
from .selection import where
from .unary import Cos, Floor, RoundAway, Sin, _F32_MAX
from ..declaration import declare

_SHIFT = 8.0              # the series run at y >= 8
_BELOW_SHIFT = float(_np.nextafter(_np.float32(_SHIFT), _np.float32(0)))   # the largest float32 below 8
_LOWEST = -2.0 ** 25      # every float32 below -2**24 is a negative integer: a pole; clamped to one


def _fit_lgamma_2_3(degree=12):
    """Power-basis coefficients (highest first) in q = u - 2.5 of lgamma(u) / (u - 2) on [2, 3]."""
    nodes = 0.5 * _np.cos(_np.pi * (_np.arange(64) + 0.5) / 64)        # Chebyshev nodes in (-1/2, 1/2)
    values = [_math.lgamma(2.5 + q) / (0.5 + q) for q in nodes]
    return _np.polyfit(nodes, values, degree).tolist()


_Q = _fit_lgamma_2_3()


def _parts(x):
    """(reflect, y, r): 1 where x < 1/2, the argument >= 1/2 the series take (1 - x there, else x), x - round(x)."""
    xc = un.Clamp.apply(x, _LOWEST, _F32_MAX)
    reflect = un.Step.apply(0.5 - xc)
    y = where(eq(reflect, 1.0), 1.0 - xc, xc)
    return reflect, y, xc - RoundAway.apply(xc)


def _shifted(y):
    """(small, yc, z): 1 where y < 8, y clamped into [1/2, 8], and the series' argument (y + 8 where small)."""
    small = un.Step.apply(_SHIFT - y)
    return small, un.Clamp.apply(y, 0.5, _SHIFT), y + small * _SHIFT


def _sin_pi(r):
    return Sin.apply(r * _math.pi)


def _lgamma_positive(y):
    """lgamma(y) for y >= 1/2."""
    z = un.Clamp.apply(y, _SHIFT, _F32_MAX)
    inv = 1.0 / z
    inv2 = inv * inv
    series = inv * (1 / 12 + inv2 * (-1 / 360 + inv2 * (1 / 1260 + inv2 * (-1 / 1680))))
    stirling = (z - 0.5) * (z.log() - 1.0) - 0.5 + 0.5 * _math.log(2 * _math.pi) + series
    yc = un.Clamp.apply(y, 0.5, _BELOW_SHIFT)
    whole = Floor.apply(yc)                           # 0 ... 7
    u = yc - whole + 2.0                              # in [2, 3)
    q = u - 2.5
    poly = q * 0.0 + _Q[0]
    for c in _Q[1:]:
        poly = poly * q + c
    product = q * 0.0 + 1.0                           # y >= 3: Gamma(y) = Gamma(u) u (u + 1) ... (y - 1)
    for j in range(5):
        product = product * (1.0 + un.Step.apply(whole - j - 2.5) * (u + (j - 1.0)))
    below_two = un.Step.apply(2.0 - yc)               # y < 2: Gamma(y) = Gamma(u) / y, and / (y + 1) below 1
    below_one = un.Step.apply(1.0 - yc)
    small_value = (u - 2.0) * poly + product.log() - below_two * yc.log() - below_one * (yc + 1.0).log()
    big = 1.0 - un.Step.apply(_SHIFT - y)
    return where(eq(big, 1.0), stirling, small_value)


def _lgamma(x):
    reflect, y, r = _parts(x)
    sine = un.abs(_sin_pi(r))
    pole = logical_and(eq(sine, 0.0), eq(reflect, 1.0))
    positive = _lgamma_positive(y)
    reflected = _math.log(_math.pi) - un.Clamp.apply(sine, 1e-38, 1.0).log() - positive
    value = where(eq(reflect, 1.0), reflected, positive)
    return where(pole, _math.inf, where(eq(x, _math.inf), x, value)) + nan_carrier(x)


def _digamma_positive(y):
    small, yc, z = _shifted(y)
    inv = 1.0 / z
    inv2 = inv * inv
    series = inv2 * (-1 / 12 + inv2 * (1 / 120 + inv2 * (-1 / 252 + inv2 * (1 / 240 + inv2 * (-1 / 132)))))
    shifted = sum(1.0 / (yc + k) for k in range(int(_SHIFT)))
    return z.log() - 0.5 * inv + series - small * shifted


def _digamma(x):
    reflect, y, r = _parts(x)
    sine = _sin_pi(r)
    zero = eq(sine, 0.0)
    safe = where(zero, 1.0, sine)
    value = _digamma_positive(y) - reflect * (_math.pi * Cos.apply(r * _math.pi) / safe)
    pole = logical_and(zero, eq(reflect, 1.0))
    at_pole = where(eq(x, 0.0), x * 0.0 - _math.inf, x * 0.0 + _math.nan)
    return where(pole, at_pole, where(eq(x, _math.inf), x, value)) + nan_carrier(x)


def _trigamma(x):
    reflect, y, r = _parts(x)
    small, yc, z = _shifted(y)
    inv = 1.0 / z
    inv2 = inv * inv
    asymptotic = inv + 0.5 * inv2 + inv * inv2 * (1 / 6 + inv2 * (-1 / 30 + inv2 * (1 / 42 + inv2 * (-1 / 30))))
    positive = asymptotic + small * sum(1.0 / ((yc + k) * (yc + k)) for k in range(int(_SHIFT)))
    sine = _sin_pi(r)
    zero = eq(sine, 0.0)
    safe = where(zero, 1.0, sine)
    value = where(eq(reflect, 1.0), _math.pi ** 2 / (safe * safe) - positive, positive)
    return where(logical_and(zero, eq(reflect, 1.0)), _math.inf, value) + nan_carrier(x)


digamma = float_math("Digamma", _digamma, lambda x, y: _trigamma(x), "y = digamma x = d lgamma(x) / dx")
declare(digamma, method=True)
lgamma = float_math("Lgamma", _lgamma, lambda x, y: digamma(x), "y = log |gamma(x)|")
declare(lgamma, method=True)
