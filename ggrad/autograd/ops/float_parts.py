"""PyTorch's copysign, frexp and rot90's relatives in float handling: the sign and the binary exponent of floats."""

import math

from ..dtype_rules import require_float
from ..grad_mode import no_grad
from ..tensor import Tensor
from ...ggml import i32
from .selection import where
from .math import isnan
from ..declaration import declare


def _negative(t):
    """Where t is negative, -0.0 included (its reciprocal is -inf)."""
    return (t < 0) | ((t == 0) & ((1.0 / t) < 0))


@declare(method=True)
def copysign(input, other):  # noqa: A002 (PyTorch's names)
    """|input| with the sign of other (-0.0 counts as negative); integers give float32."""
    x = input if input.dtype.is_float else input.float()
    sign_of = other if isinstance(other, Tensor) else x * 0.0 + float(other)
    with no_grad():
        flip = _negative(sign_of.float() if not sign_of.dtype.is_float else sign_of) != _negative(x)
    return where(flip, -x, x)


def _power_of_two(e):
    """2**e exactly, for integral e in [-80, 80]: a product of the exact powers 2**(2**b) picked by e's bits."""
    magnitude = e.abs()
    power = magnitude * 0.0 + 1.0
    for b in range(7):
        bit = (magnitude * (0.5 ** b)).floor() - (magnitude * (0.5 ** (b + 1))).floor() * 2.0
        power = power * (bit * (2.0 ** (2 ** b) - 1.0) + 1.0)
    return where(e >= 0, power, 1.0 / power)


def _scaled_down(x, e):
    """x / 2**e exactly (e in [-160, 160]), in two halves so that no power overflows."""
    half = (e * 0.5).floor()
    return x * _power_of_two(-half) * _power_of_two(half - e)


@declare(method=True)
def frexp(input):  # noqa: A002
    """(mantissa, exponent) with input = mantissa * 2**exponent, 0.5 <= |mantissa| < 1 (0, inf and nan keep
    themselves with exponent 0); the exponent is int32. The scaling by 2**-exponent is exact."""
    require_float(input, "frexp")
    with no_grad():
        magnitude = input.abs().float()
        finite = (magnitude > 0) & (magnitude < math.inf) & ~isnan(magnitude)
        safe = where(finite, magnitude, 1.0)
        guess = (safe.log() * (1.0 / math.log(2.0))).floor() + 1.0     # off by one at most (log's rounding)
        scaled = _scaled_down(safe, guess)
        exponent = where(finite, guess + (scaled >= 1.0).float() - (scaled < 0.5).float(), 0.0)
    mantissa = _scaled_down(input, exponent)
    return where(finite, mantissa, input), exponent.to(i32)
