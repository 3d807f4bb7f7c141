"""Arithmetic of two operands with broadcasting, the scalar forms that fold into one GGML node, and pow.

GGML's binary ops repeat `b` into the shape of `a`: the public functions promote the dtypes, then
expand `a` to the result's shape (or swap the operands of a commutative op) so the primitives below
only ever see that case; the Expand node's own backward sums the gradient back down.
"""

import numbers

from ...ggml import f32, ops
from ..dtype_rules import FLOAT, NUMERIC, TRUE_DIVIDE, promote, result_type
from ..function import Function
from ..primitive import Primitive
from ..tensor import Tensor
from ..torch_dtypes import BOOL
from .broadcast import broadcast_shapes, expand_to, full_operand, reduce_to
from . import unary as un
from .unary import ScaleBias
from . import folding
from .complex_operands import complex_form
from ..declaration import declare


class Add(Primitive):
    """y = a + b (b broadcast into a)."""
    dtypes = NUMERIC

    @staticmethod
    def build(ctx, graph, a, b):
        return ops.add(graph.ctx, a, full_operand(graph, a, b))

    @staticmethod
    def backward(ctx, g):
        return g, reduce_to(g, ctx.shapes[1]) if ctx.needs_input_grad[1] else None


class Sub(Primitive):
    """y = a - b (b broadcast into a)."""
    dtypes = NUMERIC

    @staticmethod
    def build(ctx, graph, a, b):
        return ops.sub(graph.ctx, a, full_operand(graph, a, b))

    @staticmethod
    def backward(ctx, g):
        return g, reduce_to(-g, ctx.shapes[1]) if ctx.needs_input_grad[1] else None


class Mul(Primitive):
    """y = a * b (b broadcast into a)."""
    dtypes = NUMERIC
    saves = "inputs"

    @staticmethod
    def build(ctx, graph, a, b):
        return ops.mul(graph.ctx, a, full_operand(graph, a, b))

    @classmethod
    def saved(cls, ctx, args, out):
        a, b = args
        return (a if ctx.needs_input_grad[1] else None, b if ctx.needs_input_grad[0] else None)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        return g * b if need_a else None, reduce_to(g * a, ctx.shapes[1]) if need_b else None


class Div(Primitive):
    """y = a / b (b broadcast into a); integer operands give float32, as PyTorch's true division."""
    dtypes = TRUE_DIVIDE
    saves = "inputs"

    @staticmethod
    def build(ctx, graph, a, b):
        return ops.div(graph.ctx, a, full_operand(graph, a, b))

    @classmethod
    def saved(cls, ctx, args, out):
        a, b = args
        return (a if ctx.needs_input_grad[1] else None, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        return g / b if need_a else None, reduce_to(-(g * a) / (b * b), ctx.shapes[1]) if need_b else None


class ScalarDiv(Primitive):
    """y = c / x for a Python number c."""
    dtypes = FLOAT
    saves = "input"

    @staticmethod
    def build(ctx, graph, x, c):
        ctx.c = c
        return ops.div(graph.ctx, ops.fill(graph.ctx, x, float(c)), x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return -ctx.c * g / (x * x), None


class PowScalar(Function):
    """y = x ** p for a Python number p (negative x allowed for integer p); composed, so its forward
    runs under no_grad and only this Function is recorded."""

    @staticmethod
    def forward(ctx, x, p):
        ctx.p = p
        ctx.save_for_backward(x)
        return _pow_value(x, p)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        if ctx.p == 0:
            return g * 0.0, None   # x ** 0 is 1 everywhere, 0 ** 0 included
        return g * _pow_value(x, ctx.p - 1) * ctx.p, None


def _pow_value(x, p):
    if p == 0:
        return un.Clamp.apply(x, 1.0, 1.0)   # 1 for every x, inf and nan too (PyTorch's 0 ** 0 = 1)
    if p == 1:
        return x * 1.0
    if p == 2:
        return un.Sqr.apply(x)
    if p == 0.5:
        return un.Sqrt.apply(x)
    if p == -1:
        return ScalarDiv.apply(x, 1.0)
    if float(p).is_integer() and abs(p) <= 64:   # exact products (exp(p log|x|) is off by a few ulp)
        power = _by_squaring(x, int(abs(p)))
        return power if p > 0 else ScalarDiv.apply(power, 1.0)
    magnitude = un.Exp.apply(un.Log.apply(un.Abs.apply(x)) * float(p))
    if float(p).is_integer() and int(p) % 2 == 1:
        return magnitude * un.Sgn.apply(x)
    if not float(p).is_integer():   # a negative base to a fractional power is nan: sqrt(sign(x)) * 0
        return magnitude + un.Sqrt.apply(un.Sgn.apply(x)) * 0.0
    return magnitude


def _by_squaring(x, n):
    """x ** n for an int n >= 2: products of repeated squares, about 2 log2(n) multiplications."""
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else result * base
        n >>= 1
        if n:
            base = un.Sqr.apply(base)
    return result


# ---- public functions ----------------------------------------------------------------------------
def _is_number(x):
    """A real Python or numpy number (a complex one is an operand of the complex forms)."""
    return not isinstance(x, Tensor) and isinstance(x, numbers.Real)   # Tensors skip the slower ABC check


def _float_and_number(a, b):
    """(tensor, number) when one side is a float Tensor and the other a Python number, else None."""
    if isinstance(a, Tensor) and _is_number(b) and a.dtype.is_float:
        return a, b
    return None


def _broadcast_apply(fn, a, b, op, commutative):
    try:
        a, b = promote(a, b, op)
    except TypeError:   # an operand no real op takes: a complex one goes to the complex op
        form = complex_form(op, a, b)
        if form is None:
            raise
        return form(a, b)
    if a.shape == b.shape:
        return fn.apply(a, b)
    out_shape = broadcast_shapes(a.shape, b.shape, op)
    if len(out_shape) > 4:
        return folding.broadcast_apply(lambda x, y: _broadcast_apply(fn, x, y, op, commutative), a, b,
                                            out_shape, op)
    if a.shape != out_shape:
        if commutative and b.shape == out_shape:
            a, b = b, a
        else:
            a = expand_to(a, out_shape)
    return fn.apply(a, b)


@declare(method=True, inplace=True)
def add(a, b, alpha=1):
    if alpha != 1:
        b = b * alpha
    pair = _float_and_number(a, b) or _float_and_number(b, a)
    if pair:
        return ScaleBias.apply(pair[0], 1.0, float(pair[1]))
    return _broadcast_apply(Add, a, b, "add", commutative=True)


@declare(method=True, inplace=True)
def sub(a, b, alpha=1):
    """a - alpha * b; a bool tensor on either side is refused, as PyTorch."""
    if any(isinstance(t, Tensor) and t.dtype is BOOL for t in (a, b)):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
                           "to invert a mask, use the `~` or `logical_not()` operator instead.")
    if alpha != 1:
        b = b * alpha
    if _float_and_number(a, b):
        return ScaleBias.apply(a, 1.0, -float(b))
    if _float_and_number(b, a):
        return ScaleBias.apply(b, -1.0, float(a))
    return _broadcast_apply(Sub, a, b, "sub", commutative=False)


@declare(method=True, inplace=True)
def mul(a, b):
    pair = _float_and_number(a, b) or _float_and_number(b, a)
    if pair:
        return ScaleBias.apply(pair[0], float(pair[1]), 0.0)
    return _broadcast_apply(Mul, a, b, "mul", commutative=True)


def div(a, b):
    if _float_and_number(a, b) and b != 0:
        return ScaleBias.apply(a, 1.0 / float(b), 0.0)
    if _float_and_number(b, a):
        return ScalarDiv.apply(b, float(a))
    return _broadcast_apply(Div, a, b, "div", commutative=False)


@declare(method=True)
def reciprocal(x):
    """1 / x; an integer x gives float32, as PyTorch."""
    return ScalarDiv.apply(x if x.dtype.is_float else x.to(f32), 1.0)


@declare(method=True)
def rsqrt(x):
    return reciprocal(un.sqrt(x))


def pow(x, p):  # noqa: A001 (PyTorch's name)
    """x ** p for a number exponent (Tensor exponents: arith.pow, the public pow)."""
    if isinstance(x, Tensor) and _is_number(p):
        if not x.dtype.is_float:   # int ** 0.5 is float, int ** 2 stays int (PyTorch's result_type)
            dtype = result_type(x, p)
            if not dtype.is_float and p < 0:
                raise RuntimeError("Integers to negative integer powers are not allowed.")
            return pow(x.to(f32), p).to(dtype)
        if p != p:   # x ** nan is nan, except 1 ** nan = 1 (C's pow, as PyTorch): by Tensor's operators and
            one = x.detach() == 1.0   # methods (logical and selection.py build on this module)
            return one.to(x.dtype).masked_fill(~one, float("nan"))
        return FLOAT(PowScalar, (x, float(p)))
    promote(x, p, "pow")   # no Tensor, or not a number: PyTorch's TypeError
    raise TypeError(f"pow: the exponent must be a number or a Tensor, got {type(p).__name__}")


