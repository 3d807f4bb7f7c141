"""Activations beyond unary.py, with PyTorch's defaults and its gradients at the kinks.

Each is a `composite` (math.py): the forward is built from GGML ops under no_grad and the recorded
gradient is PyTorch's closed form, so the value at a kink (x == 0 for elu/celu/selu/prelu, the ends of
hardtanh and hardswish) is PyTorch's. Branch values are kept finite before a 0/1 mask selects them.
"""

import math
import numbers

from ...ggml import ops
from ...ggml.errors import ArgumentError, ShapeError
from ..dtype_rules import require_float
from ..function import Function
from ..tensor import _axis
from . import unary as un
from .broadcast import reduce_to
from .math import composite, Expm1
from .unary import unary
from .selection import where
from .logical import ge, gt, le, logical_and, logical_not
from ..declaration import declare
from ..arguments import kinds


def _neg_part(x):
    return -un.Relu.apply(-x)   # min(x, 0)


def _elu(x, alpha, scale):
    return (un.Relu.apply(x) + Expm1.apply(_neg_part(x)) * alpha) * scale


def _elu_grad(x, y, alpha, scale):
    s = un.PosOrNan.apply(x)   # PyTorch's: the x > 0 branch unless x <= 0, so at nan too
    return (s + (1.0 - s) * un.Exp.apply(_finite_neg_part(x)) * alpha) * scale   # alpha e^x at x <= 0


def _finite_neg_part(x):
    """min(x, 0), and 0 at nan (GGML's clamp), for a branch that a mask drops there."""
    return un.Clamp.apply(x, -math.inf, 0.0)


_elu_fn = composite("Elu", _elu, _elu_grad, "y = scale * (x if x > 0 else alpha (e**x - 1))")

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@declare(method=True)
def elu(x, alpha=1.0, inplace=False):
    return _elu_fn(x, float(alpha), 1.0)


@declare()
def selu(x, inplace=False):
    """scale * elu(x, alpha) with the self-normalising constants."""
    return _elu_fn(x, _SELU_ALPHA, _SELU_SCALE)


@declare()
def celu(x, alpha=1.0, inplace=False):
    """max(0, x) + min(0, alpha (e**(x/alpha) - 1))."""
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0 (ZeroDivisionError in PyTorch)")
    return _celu_fn(x, float(alpha))


_celu_fn = composite("Celu", lambda x, a: un.Relu.apply(x) + Expm1.apply(_neg_part(x) * (1.0 / a)) * a,
                     lambda x, y, a: _pos_or(x, un.Exp.apply(_finite_neg_part(x) * (1.0 / a))),
                     "y = x if x > 0 else alpha (e**(x/alpha) - 1)")


def _pos_or(x, below):
    """1 where x > 0 or x is nan, `below` elsewhere."""
    s = un.PosOrNan.apply(x)
    return s + (1.0 - s) * below


def _step_or(x, below):
    """1 where x > 0, `below` elsewhere."""
    s = un.Step.apply(x)
    return s + (1.0 - s) * below


def _softplus(x, beta, threshold):
    """x where beta x > threshold, picked (not blended: x may be +-inf), else the smooth branch."""
    bx = x * beta
    smooth = un.Softplus.apply(un.ClampNumbers.apply(bx, -math.inf, threshold)) * (1.0 / beta)
    return where(gt(bx, threshold), x, smooth)


def _softplus_grad(x, y, beta, threshold):
    bx = x * beta
    linear = un.Step.apply(bx - threshold)
    return linear + (1.0 - linear) * un.Sigmoid.apply(bx)


_softplus_fn = composite("SoftplusBeta", _softplus, _softplus_grad,
                         "y = log(1 + e**(beta x)) / beta, or x where beta x > threshold")


@declare(method=True)
def softplus(x, beta=1.0, threshold=20.0):
    if beta == 1 and threshold == 20:   # PyTorch's defaults: GGML's one softplus node (above 20 it is x in f32)
        return un.Softplus.apply(x)
    return _softplus_fn(x, float(beta), float(threshold))


logsigmoid = composite("LogSigmoid", lambda x: -un.Softplus.apply(-x), lambda x, y: un.Sigmoid.apply(-x),
                       "y = log(sigmoid(x)) = -softplus(-x)")
declare(logsigmoid)


def _mish_grad(x, y):
    t = un.Tanh.apply(un.Softplus.apply(x))
    return t + x * un.Sigmoid.apply(x) * (1.0 - t * t)


mish = composite("Mish", lambda x: x * un.Tanh.apply(un.Softplus.apply(x)), _mish_grad,
                 "y = x tanh(softplus(x))")
declare(mish)

Hardsigmoid = unary("Hardsigmoid", lambda c, x: un._carry_nan(c, ops.hardsigmoid(c, x), x), lambda ctx, g, x: g * _inside(x, -3.0, 3.0) * (1.0 / 6),
                    "input", "y = clamp(x + 3, 0, 6) / 6")


def _inside(x, lo, hi):
    """1 where lo < x < hi, else 0."""
    return un.Step.apply(x - lo) * un.Step.apply(hi - x)


def _hardswish_grad(ctx, g, x):
    # PyTorch: 0 up to -3, x/3 + 1/2 strictly between -3 and 3, 1 from 3 on
    # (nan: g, as PyTorch's); x is clamped in the middle branch so that 0 * inf never makes a nan
    from_three = 1.0 - un.Step.apply(3.0 - x)
    return g * (_inside(x, -3.0, 3.0) * (un.Clamp.apply(x, -3.0, 3.0) * (1.0 / 3) + 0.5) + from_three)


Hardswish = unary("Hardswish", ops.hardswish, _hardswish_grad, "input", "y = x clamp(x + 3, 0, 6) / 6")


@declare()
def hardsigmoid(x, inplace=False):
    return Hardsigmoid.apply(x)


@declare()
def hardswish(x, inplace=False):
    return Hardswish.apply(x)


_hardtanh_fn = composite("Hardtanh", lambda x, lo, hi: un.ClampNumbers.apply(x, lo, hi),
                         lambda x, y, lo, hi: _inside(x, lo, hi) + un.IsNan.apply(x),
                         "y = clamp(x, lo, hi); gradient 1 strictly inside and at nan (PyTorch's)")


@kinds(min_val=None, max_val=None)
@declare()
def hardtanh(x, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    return _hardtanh_fn(x, float(min_val), float(max_val))


@declare()
def relu6(x, inplace=False):
    return hardtanh(x, 0.0, 6.0)


softsign = composite("Softsign", lambda x: x / (un.abs(x) + 1.0),
                     lambda x, y: 1.0 / un.Sqr.apply(un.abs(x) + 1.0), "y = x / (1 + |x|)")
declare(softsign)
tanhshrink = composite("Tanhshrink", lambda x: x - un.Tanh.apply(x),
                       lambda x, y: un.Sqr.apply(un.Tanh.apply(x)), "y = x - tanh x")
declare(tanhshrink)


@declare()
def glu(x, dim=-1):
    """a * sigmoid(b) where a, b are the two halves of x along `dim`."""
    d = _axis(dim, x.ndim)
    if x.shape[d] % 2:
        raise ShapeError(f"glu: halving dimension {d} must be even, but its size is {x.shape[d]} (shape {x.shape})")
    a, b = x.chunk(2, d)
    return a * un.sigmoid(b)


@declare()
def prelu(x, weight):
    """x where x > 0, else weight * x, weight (1,) or (channels,) along dim 1."""
    n = weight.numel()
    if n != 1 and (x.ndim < 2 or x.shape[1] != n):
        raise ShapeError(f"prelu: weight of {n} elements does not match input {x.shape} (needs 1 or channels "
                         f"= dim 1)")
    w = weight.reshape((n,) + (1,) * (x.ndim - 2)) if n != 1 and x.ndim > 2 else weight.reshape(
        (n,) if n != 1 else ())
    return _PRelu.apply(x, w)


class _PRelu(Function):
    """y = x if x > 0 else w x; gradient to x: 1 or w (w at 0, as PyTorch), to w: min(x, 0) summed."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return un.Relu.apply(x) + w * _neg_part(x)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = g * _step_or(x, w) if ctx.needs_input_grad[0] else None
        gw = reduce_to(g * _neg_part(x), w.shape) if ctx.needs_input_grad[1] else None
        return gx, gw



def _outside(x, lambd):
    """True where x is not in [-lambd, lambd] (nan included, as PyTorch's shrink kernels leave nan)."""
    if isinstance(lambd, bool) or not isinstance(lambd, numbers.Real):
        raise TypeError(f"lambd must be a number, not {type(lambd).__name__}")
    return logical_not(logical_and(ge(x, -lambd), le(x, lambd)))


@declare()
def hardshrink(x, lambd=0.5):
    """x outside [-lambd, lambd], 0 inside."""
    outside = _outside(x, lambd)
    require_float(x, "hardshrink")
    return where(outside, x, 0.0)


@declare()
def softshrink(x, lambd=0.5):
    """x moved towards 0 by lambd outside [-lambd, lambd], 0 inside."""
    outside = _outside(x, lambd)
    require_float(x, "softshrink")
    if lambd < 0:
        raise ArgumentError(f"softshrink: lambda must be in range [0, inf) for input dtype {x.dtype.name}, "
                            f"but found {lambd}")
    return where(outside, x - un.sign(x) * float(lambd), 0.0)
