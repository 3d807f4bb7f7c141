"""Elementwise math beyond unary.py: rounding, trigonometric and hyperbolic functions and their inverses,
erf, expm1/log1p, and the float tests isnan/isinf/isfinite with nan_to_num.

GGML has floor, ceil, round (halves away from zero), trunc, expm1, exp, log, sqrt, sin, cos and tanh; the
rest are compositions of those. A composition is a `composite`: its forward runs under no_grad and only
its closed-form gradient is recorded (one node, and PyTorch's gradient at the edges).

Selections between branches multiply by 0/1 masks, so every branch is kept finite (clamped) first, and
a nan input is carried to the result by adding `tanh(x) * 0` (nan for nan, 0 for every other x, inf too).
The float tests rest on GGML's clamp sending nan to its upper bound (the CPU's MIN/MAX and CUDA's
fminf/fmaxf both do).

isnan, isinf, isposinf, isneginf and isfinite return bool, as PyTorch. Differences from PyTorch: log1p, asinh and atanh lose accuracy at infinite inputs (nan, not inf); atan is a polynomial good
to 5e-9 before float32 rounding.
"""

import math as _math

import numpy as _np

from ...ggml import f32, ops
from ..arguments import as_int
from ..dtype_rules import FLOAT, INT_TO_FLOAT, promote, require_float
from ..function import Function
from ..grad_mode import no_grad
from . import unary as un
from .unary import Ceil, Floor, RoundAway, Trunc, unary, _F32_MAX
from ..torch_dtypes import BOOL
from ..tensor import Tensor
from .broadcast import broadcast_shapes, expand_to
from .convert import relabel
from .logical import eq, ge, lt
from .selection import where
from ..declaration import declare


def composite(name, forward, grad, doc, dtypes=FLOAT):
    """A Function y = forward(x, *params) built from ops but recorded as one node, whose gradient is
    g * grad(x, y, *params) (grad may return a Python number); `dtypes` is its dtype rule."""
    def fwd(ctx, x, *params):
        y = forward(x, *params)
        ctx.params = params
        ctx.save_for_backward(x, y)   # the output: create_graph differentiates through it
        return y

    def bwd(ctx, g):
        x, y = ctx.saved_tensors
        return (g * grad(x, y, *ctx.params),) + (None,) * len(ctx.params)

    fn = type(name, (Function,), {"forward": staticmethod(fwd), "backward": staticmethod(bwd), "__doc__": doc,
                                  "__module__": __name__})
    def op(x, *params):
        return dtypes(fn, (x,) + params)
    op.__name__ = op.__qualname__ = name.lower()
    op.__doc__ = doc
    return op


def float_math(name, forward, grad, doc):
    """A composite whose integer inputs give float32 results (PyTorch's tan, erf, asinh, ... of an int tensor)."""
    return composite(name, forward, grad, doc, INT_TO_FLOAT)


Expm1 = unary("Expm1", ops.expm1, lambda ctx, g, y: g * (y + 1.0), "output", "y = e**x - 1", INT_TO_FLOAT)


def nan_carrier(x):
    """0 where x is a number (infinities included), nan where x is nan: 0 / (1 - isnan(x)), from cheap
    elementwise ops (GGML's tanh costs ~30x more per element on the CPU)."""
    nan = un.IsNan.apply(x)
    return (nan * 0.0) / (1.0 - nan)


def _integer_passthrough(fn):
    def op(x):
        return x * 1 if not x.dtype.is_float else fn.apply(x)
    op.__name__ = fn.__name__.lower()
    op.__doc__ = fn.__doc__
    return op


floor = _integer_passthrough(Floor)
declare(floor, method=True, inplace=True)
ceil = _integer_passthrough(Ceil)
declare(ceil, method=True, inplace=True)
trunc = _integer_passthrough(Trunc)
declare(trunc, method=True, inplace=True, aliases=("fix",))


def _round_half_even(x):
    r = RoundAway.apply(x)
    tie = un.Step.apply(1e-12 - un.abs(x - Floor.apply(x) - 0.5))   # 1 at exact halves (nan, inf: 0)
    bounded = un.Clamp.apply(r, -2.0 ** 24, 2.0 ** 24)
    odd = bounded - Floor.apply(bounded * 0.5) * 2.0
    return r - un.Sgn.apply(x) * tie * odd   # a half rounded away to an odd integer moves back by one


_round = composite("Round", _round_half_even, lambda x, y: 0.0, "y = round(x), halves to even (gradient 0)")


@declare(method=True, inplace=True)
def round(x, decimals=0):  # noqa: A001 (PyTorch's name)
    """Round to `decimals` places, halves to even, as PyTorch."""
    decimals = as_int(decimals, "decimals", "round")
    if not x.dtype.is_float:
        return x * 1
    if decimals == 0:
        return _round(x)
    scale = 10.0 ** decimals
    return _round(x * scale) * (1.0 / scale)


@declare(method=True)
def frac(x):
    """x - trunc(x); floating point only, as PyTorch."""
    require_float(x, "frac")
    return x - trunc(x)


# ---- exponentials and logarithms -------------------------------------------------------------------
expm1 = float_math("Expm1", lambda x: Expm1.apply(x), lambda x, y: y + 1.0, "y = e**x - 1")
declare(expm1, method=True)


def _log1p(x):
    """log(1 + x) accurately for small x: log(u) * x / (u - 1) with u = 1 + x (x itself where u == 1);
    the ratio x / (u - 1) is taken of x clamped to 1e30, where it is 1."""
    u = x + 1.0
    bounded = un.Clamp.apply(x, -1.0, 1e30)
    d = (bounded + 1.0) - 1.0
    at_one = 1.0 - un.Step.apply(un.abs(d))
    return un.Log.apply(u) * (bounded / (d + at_one)) + at_one * bounded


log1p = float_math("Log1p", _log1p, lambda x, y: 1.0 / (x + 1.0), "y = ln(1 + x)")
declare(log1p, method=True)


@declare(method=True)
def log2(x):
    return un.log(x) * (1.0 / _math.log(2.0))


@declare(method=True)
def log10(x):
    return un.log(x) * (1.0 / _math.log(10.0))


@declare(method=True)
def exp2(x):
    return un.exp(x * _math.log(2.0))


# ---- trigonometric and hyperbolic ----------------------------------------------------------------
tan = float_math("Tan", lambda x: un.Sin.apply(x) / un.Cos.apply(x), lambda x, y: y * y + 1.0, "y = tan x")
declare(tan, method=True, inplace=True)
sinh = float_math("Sinh", lambda x: (Expm1.apply(x) - Expm1.apply(-x)) * 0.5,
                 lambda x, y: (un.Exp.apply(x) + un.Exp.apply(-x)) * 0.5, "y = sinh x")
declare(sinh, method=True, inplace=True)
cosh = float_math("Cosh", lambda x: (un.Exp.apply(x) + un.Exp.apply(-x)) * 0.5,
                 lambda x, y: (Expm1.apply(x) - Expm1.apply(-x)) * 0.5, "y = cosh x")
declare(cosh, method=True, inplace=True)

# atan(u) = u + u^3 (c0 + c1 u^2 + c2 u^4 + c3 u^6) on |u| <= tan(pi/8): a least-squares fit at 2000
# Chebyshev nodes (max error 5.4e-9, below float32's rounding there)
_ATAN_COEFFS = (-0.333327268, 0.199710362, -0.138171089, 0.0788242842)
_TAN_PI_8 = _math.tan(_math.pi / 8)


def _atan(x):
    ax = un.abs(x)
    t = un.Clamp.apply(ax, 0.0, 1.0) / un.Clamp.apply(ax, 1.0, _F32_MAX)   # |x| or 1/|x|, in [0, 1]
    outer = un.Step.apply(ax - 1.0)
    upper = un.Step.apply(t - _TAN_PI_8)
    u = t + upper * ((t - 1.0) / (t + 1.0) - t)   # atan(t) = pi/4 + atan((t-1)/(t+1)) above tan(pi/8)
    u2 = u * u
    poly = _ATAN_COEFFS[-1]
    for c in reversed(_ATAN_COEFFS[:-1]):
        poly = u2 * poly + c
    a = u + u * u2 * poly + upper * (_math.pi / 4)
    a = a + outer * (_math.pi / 2 - a * 2.0)       # atan(|x|) = pi/2 - atan(1/|x|) beyond 1
    return un.Sgn.apply(x) * a + nan_carrier(x)


atan = float_math("Atan", _atan, lambda x, y: 1.0 / (x * x + 1.0), "y = atan x")
declare(atan, method=True, inplace=True, aliases=("arctan",))
asin = float_math("Asin", lambda x: _atan(x / un.Sqrt.apply(1.0 - x * x)),
                 lambda x, y: 1.0 / un.Sqrt.apply(1.0 - x * x), "y = asin x (nan outside [-1, 1])")
declare(asin, method=True, aliases=("arcsin",))
class _Atan2(Function):
    """atan2(y, x): the angle of the point (x, y), in (-pi, pi]; gradient (x, -y) / (x^2 + y^2), 0 at
    the origin."""

    @staticmethod
    def forward(ctx, y, x):
        ctx.save_for_backward(y, x)
        with no_grad():
            base = _atan(y / x)
            turned = where(ge(y, 0.0), base + _math.pi, base - _math.pi)   # x < 0: the left half-plane
            out = where(lt(x, 0.0), turned, base)
            return where(eq(x, 0.0), un.Sgn.apply(y) * (_math.pi / 2) + nan_carrier(y), out)

    @staticmethod
    def backward(ctx, g):
        y, x = ctx.saved_tensors
        r2 = x * x + y * y
        inverse = where(eq(r2, 0.0), 0.0, 1.0 / r2)   # 0 at the origin, as PyTorch (not 0 / 0)
        return g * x * inverse, -(g * y) * inverse


@declare(method=True, aliases=("arctan2",))
def atan2(input, other):  # noqa: A002 (PyTorch's names)
    """The angle of the point (other, input) in (-pi, pi] (float32 for integer inputs). Differences from
    PyTorch: both coordinates infinite gives nan (C: a multiple of pi/4), and the signs of zeros are not
    read (atan2(0, -0) is 0, C's pi)."""
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise TypeError("atan2(): input and other must be Tensors (PyTorch takes no numbers here)")
    y, x = promote(input, other, "atan2")
    if not y.dtype.is_float:
        y, x = y.to(f32), x.to(f32)
    shape = broadcast_shapes(y.shape, x.shape, "atan2")
    return FLOAT(_Atan2, (expand_to(y, shape), expand_to(x, shape)))




acos = float_math("Acos", lambda x: _atan(un.Sqrt.apply((1.0 - x) / (x + 1.0))) * 2.0,
                 lambda x, y: -1.0 / un.Sqrt.apply(1.0 - x * x), "y = acos x (nan outside [-1, 1])")
declare(acos, method=True, aliases=("arccos",))


def _asinh(x):
    """sign(x) log1p(|x| + x^2 / (sqrt(x^2 + 1) + 1)) up to 1e18, the fraction written so that x^2 never
    overflows; sign(x) (log|x| + log 2) beyond."""
    ax = un.abs(x)
    near = un.Clamp.apply(ax, 0.0, 1e18)
    inv = 1.0 / near
    small = _log1p(near + near / (un.Sqrt.apply(inv * inv + 1.0) + inv))
    return un.Sgn.apply(x) * (small + _beyond(ax, small)) + nan_carrier(x)


def _beyond(ax, small):
    """log(ax) + log 2 - small where ax > 1e18, else 0 (+inf kept)."""
    far = un.Log.apply(un.Relu.apply(ax - 1e18) + 1e18) + _math.log(2.0)
    return un.Step.apply(ax - 1e18) * (far - small)


def _acosh(x):
    """log1p((x-1) + sqrt((x-1)(x+1))) up to 1e18 (exact near 1), log(x) + log 2 beyond."""
    near = un.Clamp.apply(x, -_F32_MAX, 1e18)
    small = _log1p((near - 1.0) + un.Sqrt.apply((near - 1.0) * (near + 1.0)))
    return small + _beyond(x, small) + nan_carrier(x)


asinh = float_math("Asinh", _asinh, lambda x, y: 1.0 / un.Sqrt.apply(x * x + 1.0), "y = asinh x")
declare(asinh, method=True, aliases=("arcsinh",))
acosh = float_math("Acosh", _acosh, lambda x, y: 1.0 / un.Sqrt.apply(x * x - 1.0), "y = acosh x (nan below 1)")
declare(acosh, method=True, aliases=("arccosh",))
atanh = float_math("Atanh", lambda x: _log1p(x * 2.0 / (1.0 - x)) * 0.5, lambda x, y: 1.0 / (1.0 - x * x),
                  "y = atanh x (nan outside [-1, 1])")
declare(atanh, method=True, aliases=("arctanh",))


# ---- erf -----------------------------------------------------------------------------------------
_TWO_OVER_SQRT_PI = 2.0 / _math.sqrt(_math.pi)


def _erf(x):
    """Near 0 its Taylor series (to z^9, error < 4e-7 relative below 0.5); elsewhere from GGML's exact
    gelu, erf(z) = 2 gelu(sqrt2 z) / (sqrt2 z) - 1, with z kept inside [-6, 6] (erf is +-1 beyond)."""
    z = un.Clamp.apply(x, -6.0, 6.0)
    near = un.Step.apply(0.5 - un.abs(z))
    z2 = z * z
    series = z * ((((z2 * (1.0 / 216) - 1.0 / 42) * z2 + 0.1) * z2 - 1.0 / 3) * z2 + 1.0) * _TWO_OVER_SQRT_PI
    arg = z * _math.sqrt(2.0) + near   # never 0 where the gelu branch is used
    far = un.Gelu.apply(arg) * 2.0 / arg - 1.0
    return far + near * (series - far) + nan_carrier(x)


def _fit_erfc_tail(degree=11, nodes=96):
    """Power-basis coefficients (highest first) in t = 1 / (1 + z/2) of log(erfc(z) / t) + z^2 for z in
    [0, 12], fitted at import to math.erfc (float64, Chebyshev nodes in t; within 4e-9)."""
    t = 1 / 7 + (1 - 1 / 7) * (_np.cos(_np.pi * (_np.arange(nodes) + 0.5) / nodes) + 1) / 2
    z = 2 * (1 / t - 1)
    values = [_math.log(_math.erfc(zi) / ti) + zi * zi for zi, ti in zip(z, t)]
    return _np.polyfit(t, values, degree).tolist()


_ERFC_TAIL = _fit_erfc_tail()


def _erfc(x):
    """erfc with relative accuracy in the tail: for z = |x|, t exp(-z^2 + P(t)), t = 1 / (1 + z/2) and P
    fitted (_fit_erfc_tail); z^2 split as zh^2 + (z - zh)(z + zh) with zh = z to 1/64, so that zh^2 is exact
    in float32 and the exponent loses no digits. erfc(x) = 2 - erfc(-x) below 0."""
    z = un.Clamp.apply(un.abs(x), 0.0, 12.0)
    t = 1.0 / (z * 0.5 + 1.0)
    p = t * 0.0 + _ERFC_TAIL[0]
    for c in _ERFC_TAIL[1:]:
        p = p * t + c
    high = Floor.apply(z * 64.0) * (1.0 / 64.0)
    tail = t * un.Exp.apply(-(high * high)) * un.Exp.apply(p - (z - high) * (z + high))
    positive = un.Step.apply(x)
    return tail + (1.0 - positive) * (2.0 - 2.0 * tail) + nan_carrier(x)


erf = float_math("Erf", _erf, lambda x, y: un.Exp.apply(-(x * x)) * _TWO_OVER_SQRT_PI, "y = erf x")
declare(erf, method=True, inplace=True)
erfc = float_math("Erfc", _erfc, lambda x, y: un.Exp.apply(-(x * x)) * -_TWO_OVER_SQRT_PI,
                  "y = 1 - erf x, to a few float32 units relatively in the tail too")
declare(erfc, method=True)


# ---- float tests ---------------------------------------------------------------------------------
def _tests(x):
    """(not finite, >= 1 or nan, <= -1 or nan) as 0/1 floats: clamp sends nan to its upper bound."""
    return un.Clamp.apply(x - x, 0.0, 1.0), un.Clamp.apply(x, 0.0, 1.0), un.Clamp.apply(-x, 0.0, 1.0)


def _float_test(fn):
    def op(x):
        with no_grad():
            if not x.dtype.is_float:   # integers are finite
                return relabel(x.float() * 0.0 + (1.0 if fn.__name__ == "isfinite" else 0.0), BOOL)
            return relabel(fn(*_tests(x.float())), BOOL)   # 0/1 floats are ggrad's bool storage
    op.__name__ = fn.__name__
    op.__doc__ = fn.__doc__
    return op


@declare(method=True)
@_float_test
def isfinite(bad, pos, neg):
    """True where x is finite (a bool tensor)."""
    return 1.0 - bad


@declare(method=True)
@_float_test
def isnan(bad, pos, neg):
    """True where x is nan (a bool tensor)."""
    return bad * pos * neg


@declare(method=True)
@_float_test
def isinf(bad, pos, neg):
    """True where x is +-inf (a bool tensor)."""
    return bad - bad * pos * neg


@declare(method=True)
@_float_test
def isposinf(bad, pos, neg):
    """True where x is +inf (a bool tensor)."""
    return (bad - bad * pos * neg) * pos


@declare(method=True)
@_float_test
def isneginf(bad, pos, neg):
    """True where x is -inf (a bool tensor)."""
    return (bad - bad * pos * neg) * neg


def _nan_to_num(x, nan, posinf, neginf):
    """Each replacement picked by a mask, not blended: a replacement may itself be inf or nan."""
    bad, pos, neg = _tests(x)
    is_nan = bad * pos * neg
    is_inf = bad - is_nan
    out = where(relabel(is_inf * pos, BOOL), posinf, x)
    out = where(relabel(is_inf * neg, BOOL), neginf, out)
    return where(relabel(is_nan, BOOL), nan, out)


_nan_to_num_fn = composite("NanToNum", _nan_to_num, lambda x, y, *values: 1.0 - _tests(x)[0],
                           "nan, +inf and -inf replaced by numbers; gradient 1 where x is finite, else 0")


_LARGEST = {"f16": 65504.0, "bf16": 3.3895313892515355e38}   # finite maxima of the half types (else f32's)


@declare(method=True, inplace=True)
def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """x with nan, +inf and -inf replaced (by default by 0 and the largest finite values of x's dtype)."""
    if not x.dtype.is_float:
        return x * 1
    top = _LARGEST.get(x.dtype.name, _F32_MAX)
    posinf = top if posinf is None else float(posinf)   # a value past the dtype's range is inf there, as
    neginf = -top if neginf is None else float(neginf)  # PyTorch's cast makes it
    return _nan_to_num_fn(x, float(nan), posinf, neginf)
