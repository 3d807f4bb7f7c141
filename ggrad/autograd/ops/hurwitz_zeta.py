"""The Hurwitz zeta function and polygamma (PyTorch's torch.special.zeta, torch.polygamma), composed from GGML's
elementwise ops.

zeta(s, q) = sum_k (q + k)^-s by the Euler-Maclaurin formula: the first N = 18 terms, then
(q + N)^(1-s) / (s - 1) + (q + N)^-s / 2 + sum_j B_2j / (2j)! s (s+1) ... (s+2j-2) (q + N)^(-s-2j+1), 12 Bernoulli
terms (accurate while q + N >= 9). Domain as PyTorch's: inf at s = 1 and at the poles q = 0, -1, -2, ...; nan for
s < 1, and for q < 0 with a non-integer s. Difference: for q <= -9 the tail would start too close to 0 (PyTorch
adds terms until it does not); the result is then nan instead of PyTorch's value.

polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 1, digamma for n = 0; its gradient is polygamma(n + 1, x),
as PyTorch's. zeta's gradient (PyTorch has none) is the formula's own.
"""

import math
from fractions import Fraction

from ..dtype_rules import promote
from ..function import Function
from ..tensor import Tensor
from . import unary as un
from .broadcast import broadcast_shapes, expand_to
from .gamma_functions import digamma
from .arith import fmod
from .math import nan_carrier
from .selection import where
from ..declaration import declare

_TERMS = 18   # the series' tail needs q + _TERMS >= 9: q > -9
_BERNOULLI = (Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30), Fraction(5, 66),
              Fraction(-691, 2730), Fraction(7, 6), Fraction(-3617, 510), Fraction(43867, 798),
              Fraction(-174611, 330), Fraction(854513, 138), Fraction(-236364091, 2730))   # B_2 .. B_24
_TAIL = tuple(float(b / math.factorial(2 * j)) for j, b in enumerate(_BERNOULLI, 1))   # B_2j / (2j)!


def _power(base, s):
    """base^-s, real for a negative base only where s is an integer (nan otherwise)."""
    magnitude = un.Exp.apply(-s * un.Log.apply(un.abs(base)))
    odd = fmod(un.abs(s), 2.0) == 1.0
    integer = un.Floor.apply(s) == s
    negative = base < 0
    signed = where(negative & odd, -magnitude, magnitude)
    return where(negative & ~integer, math.nan, signed)


def _zeta(s, q):
    total = _power(q, s)
    for k in range(1, _TERMS):
        total = total + _power(q + float(k), s)
    w = un.Clamp.apply(q + float(_TERMS), 9.0, math.inf)   # q + N for q > -9 (the documented range)
    w_power = _power(w, s)
    total = total + w_power * w / (s - 1.0) + w_power * 0.5
    rising, inverse, factor = s, 1.0 / w, w_power / w   # s (s+1) ... (s+2j-2), w^(-s-2j+1)
    for j, c in enumerate(_TAIL):
        total = total + factor * rising * c
        rising = rising * (s + float(2 * j + 1)) * (s + float(2 * j + 2))
        factor = factor * inverse * inverse
    pole = (q <= 0) & (un.Floor.apply(q) == q)
    out = where((s == 1.0) | pole, math.inf, where(s < 1.0, math.nan, total))
    return where(q <= 9.0 - _TERMS, math.nan, out) + nan_carrier(s) + nan_carrier(q)


@declare()
def zeta(input, other):  # noqa: A002 (PyTorch's names)
    """The Hurwitz zeta function zeta(x, q) = sum_k (q + k)^-x (torch.special.zeta); numbers allowed for one."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError("special_zeta(): expected at least one Tensor argument")
    s, q = promote(input, other, "zeta")
    s, q = (s if s.dtype.is_float else s.float()), (q if q.dtype.is_float else q.float())
    shape = broadcast_shapes(s.shape, q.shape, "zeta")
    return _zeta(expand_to(s, shape), expand_to(q, shape))


class _Polygamma(Function):
    """polygamma(n, x) for n >= 1, with the gradient polygamma(n + 1, x)."""

    @staticmethod
    def forward(ctx, x, n):
        ctx.n = n
        ctx.save_for_backward(x)
        sign = -1.0 if n % 2 == 0 else 1.0
        return _zeta(x * 0.0 + float(n + 1), x) * (sign * math.factorial(n))

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * polygamma(ctx.n + 1, x), None


@declare()
def polygamma(n, input):  # noqa: A002
    """The n-th derivative of digamma (torch.polygamma(n, input)); RuntimeError for n < 0, as PyTorch."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"polygamma(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    x = input if input.dtype.is_float else input.float()
    return digamma(x) if n == 0 else _Polygamma.apply(x, n)
