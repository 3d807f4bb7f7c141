"""`erfinv`, the inverse error function (PyTorch's torch.erfinv), composed from GGML's ops.

Giles' single-precision approximation ("Approximating the erfinv function", GPU Computing Gems, 2011): with
w = -log((1 - x)(1 + x)), a degree-8 polynomial in w - 2.5 for w < 5, else in sqrt(w) - 3, times x: within
2.5e-7 of PyTorch's relatively over [-1, 1]. erfinv(+-1) = +-inf, nan outside [-1, 1]. The gradient is
sqrt(pi) / 2 * exp(y^2).
"""

import math as _math

from . import unary as un
from .selection import where
from .logical import eq
from .math import float_math, nan_carrier
from ..declaration import declare

_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
            -0.00417768164, 0.246640727, 1.50140941)
_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
         0.00943887047, 1.00167406, 2.83297682)


def _polynomial(coefficients, w):
    p = w * 0.0 + coefficients[0]
    for c in coefficients[1:]:
        p = p * w + c
    return p


def _erfinv(x):
    log_term = ((1.0 - x) * (1.0 + x)).log()        # nan outside [-1, 1], -inf at +-1
    w = un.Clamp.apply(-log_term, 0.0, 50.0)         # finite in both branches (the selection multiplies)
    tail = un.Step.apply(w - 5.0)
    central = _polynomial(_CENTRAL, un.Clamp.apply(w, 0.0, 5.0) - 2.5)
    far = _polynomial(_TAIL, un.Clamp.apply(w, 5.0, 50.0).sqrt() - 3.0)
    y = x * (central + tail * (far - central))
    return where(eq(un.abs(x), 1.0), x * _math.inf, y) + nan_carrier(log_term)


erfinv = float_math("Erfinv", _erfinv, lambda x, y: (y * y).exp() * (_math.sqrt(_math.pi) / 2.0), "y = erfinv x")
declare(erfinv, method=True)
