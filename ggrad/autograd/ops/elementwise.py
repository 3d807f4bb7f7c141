"""Elementwise ops: unary math and activations, broadcast binary arithmetic, scalar forms.

Primitives carry their backward right beside the forward. Float16 inputs are computed in float32 and
cast back; int32 arithmetic is computed in float32 (exact below 2**24) and cast back.
"""

import math
import numbers

from ...ggml import f32, i32, ops
from ...ggml.errors import DTypeError, ShapeError
from ..function import Function
from ..nodes import alias, contiguous, emit, like, ne_of, shape_tensor, step_of
from ..tensor import Tensor
from ..factory import full


# ---- helpers -----------------------------------------------------------------------------------
def broadcast_shapes(a, b, op="broadcast"):
    """numpy's broadcasting rule, with an error naming the op and both shapes."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else 1
        db = b[-i] if i <= len(b) else 1
        if da != db and da != 1 and db != 1:
            raise ShapeError(f"{op}: shapes {tuple(a)} and {tuple(b)} cannot be broadcast "
                             f"(dimension {-i}: {da} vs {db})")
        out.append(max(da, db) if da != 0 and db != 0 else 0)
    return tuple(reversed(out))


def reduce_to(g, shape):
    """Sum a broadcast gradient `g` back down to `shape` (GGML's repeat_back)."""
    if g.shape == tuple(shape):
        return g
    return SumTo.apply(g, tuple(shape))


def expand_to(step, x, shape):
    """x's node repeated to `shape` (a copy, as GGML has no zero-stride views)."""
    if x.shape == tuple(shape):
        return contiguous(step, x)
    ne = ne_of(shape)
    return ops.repeat_4d(step.context(), contiguous(step, x), *ne)


class SumTo(Function):
    """Sum over the dimensions that broadcasting added or stretched."""
    primitive = True

    @staticmethod
    def forward(ctx, x, shape):
        step = step_of(x)
        ctx.in_shape = x.shape
        target = shape_tensor(step, shape, x.dtype)
        return emit(step, ops.repeat_back(step.context(), contiguous(step, x), target), shape, x.dtype, x.device)

    @staticmethod
    def backward(ctx, g):
        return Expand.apply(g, ctx.in_shape), None


class Expand(Function):
    """Repeat along broadcast dimensions (materialised)."""
    primitive = True

    @staticmethod
    def forward(ctx, x, shape):
        step = step_of(x)
        ctx.in_shape = x.shape
        return emit(step, expand_to(step, x, shape), shape, x.dtype, x.device)

    @staticmethod
    def backward(ctx, g):
        return reduce_to(g, ctx.in_shape), None


# ---- binary ------------------------------------------------------------------------------------
class _Binary(Function):
    primitive = True
    commutative = False
    op = None

    @classmethod
    def build(cls, a, b):
        out_shape = broadcast_shapes(a.shape, b.shape, cls.__name__.lower())
        step = step_of(a, b)
        ctx = step.context()
        if b.shape == out_shape and a.shape != out_shape and cls.commutative:
            a, b = b, a
        if a.shape != out_shape:
            ga = expand_to(step, a, out_shape)
        else:
            ga = contiguous(step, a)
        gb = contiguous(step, b)
        return emit(step, cls.op(ctx, ga, gb), out_shape, a.dtype, a.device)

    @classmethod
    def forward(cls, ctx, a, b):
        ctx.shapes = (a.shape, b.shape)
        return cls.build(a, b)


class Add(_Binary):
    commutative = True
    op = staticmethod(ops.add)

    @staticmethod
    def backward(ctx, g):
        sa, sb = ctx.shapes
        return (reduce_to(g, sa) if ctx.needs_input_grad[0] else None,
                reduce_to(g, sb) if ctx.needs_input_grad[1] else None)


class Sub(_Binary):
    op = staticmethod(ops.sub)

    @staticmethod
    def backward(ctx, g):
        sa, sb = ctx.shapes
        return (reduce_to(g, sa) if ctx.needs_input_grad[0] else None,
                reduce_to(-g, sb) if ctx.needs_input_grad[1] else None)


class Mul(_Binary):
    commutative = True
    op = staticmethod(ops.mul)

    @classmethod
    def forward(cls, ctx, a, b):
        ctx.shapes = (a.shape, b.shape)
        ctx.save_for_backward(a if ctx.needs_input_grad[1] else None, b if ctx.needs_input_grad[0] else None)
        return cls.build(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        sa, sb = ctx.shapes
        return (reduce_to(g * b, sa) if ctx.needs_input_grad[0] else None,
                reduce_to(g * a, sb) if ctx.needs_input_grad[1] else None)


class Div(_Binary):
    op = staticmethod(ops.div)

    @classmethod
    def forward(cls, ctx, a, b):
        ctx.shapes = (a.shape, b.shape)
        ctx.save_for_backward(a if ctx.needs_input_grad[1] else None, b)
        return cls.build(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        sa, sb = ctx.shapes
        ga = reduce_to(g / b, sa) if ctx.needs_input_grad[0] else None
        gb = reduce_to(-(g * a) / (b * b), sb) if ctx.needs_input_grad[1] else None
        return ga, gb


# ---- scalar forms: a*x + b in one GGML node ----------------------------------------------------
class ScaleBias(Function):
    """y = x * scale + bias for Python numbers scale and bias."""
    primitive = True

    @staticmethod
    def forward(ctx, x, scale, bias):
        step = step_of(x)
        ctx.scale = scale
        g = contiguous(step, x)
        if bias == 0:
            node = ops.scale(step.context(), g, float(scale))
        else:
            node = ops.scale_bias(step.context(), g, float(scale), float(bias))
        return like(step, node, x)

    @staticmethod
    def backward(ctx, g):
        return ScaleBias.apply(g, ctx.scale, 0.0), None, None


class ScalarDiv(Function):
    """y = c / x for a Python number c."""
    primitive = True

    @staticmethod
    def forward(ctx, x, c):
        step = step_of(x)
        g = contiguous(step, x)
        filled = ops.fill(step.context(), g, float(c))
        out = like(step, ops.div(step.context(), filled, g), x)
        ctx.c = c
        ctx.save_for_backward(x)
        return out

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return -ctx.c * g / (x * x), None


# ---- unary -------------------------------------------------------------------------------------
class _Unary(Function):
    """x -> op(x); `_unary` makes each: `node(ctx, x_node, *params)` builds it, `grad(ctx, g, *saved)` is its
    backward, `saves` picks what is kept ("input", "output", "both" or "none")."""
    primitive = True
    saves = "input"

    @classmethod
    def forward(cls, ctx, x, *params):
        step = step_of(x)
        ctx.params = params
        y = like(step, cls.node(step.context(), contiguous(step, x), *params), x)
        if cls.saves == "input":
            ctx.save_for_backward(x)
        elif cls.saves == "output":
            ctx.save_for_backward(alias(y))
        elif cls.saves == "both":
            ctx.save_for_backward(x, alias(y))
        return y

    @classmethod
    def backward(cls, ctx, g):
        return (cls.grad(ctx, g, *ctx.saved_tensors),) + (None,) * len(ctx.params)


def _unary(name, node, grad, saves="input", doc=""):
    cls = type(name, (_Unary,), {"node": classmethod(lambda cls, c, gx, *p: node(c, gx, *p)),
                                 "grad": staticmethod(grad), "saves": saves, "__doc__": doc})
    return cls


def _step(x):
    return Step.apply(x)


Neg = _unary("Neg", ops.neg, lambda ctx, g: -g, "none", "y = -x")
Abs = _unary("Abs", ops.abs, lambda ctx, g, x: g * Sgn.apply(x), doc="y = |x|")
Sgn = _unary("Sgn", ops.sgn, lambda ctx, g, x: g * 0.0, doc="y = sign(x) (gradient 0)")
Step = _unary("Step", ops.step, lambda ctx, g, x: g * 0.0, doc="y = 1 if x > 0 else 0 (gradient 0)")
Exp = _unary("Exp", ops.exp, lambda ctx, g, y: g * y, "output", "y = e**x")
Log = _unary("Log", ops.log, lambda ctx, g, x: g / x, doc="y = ln x")
Sqrt = _unary("Sqrt", ops.sqrt, lambda ctx, g, y: g * 0.5 / y, "output", "y = sqrt(x)")
Sqr = _unary("Sqr", ops.sqr, lambda ctx, g, x: g * x * 2.0, doc="y = x*x")
Sin = _unary("Sin", ops.sin, lambda ctx, g, x: g * Cos.apply(x), doc="y = sin x")
Cos = _unary("Cos", ops.cos, lambda ctx, g, x: -(g * Sin.apply(x)), doc="y = cos x")
Tanh = _unary("Tanh", ops.tanh, lambda ctx, g, y: g * (1.0 - y * y), "output", "y = tanh x")
Sigmoid = _unary("Sigmoid", ops.sigmoid, lambda ctx, g, y: g * y * (1.0 - y), "output", "y = 1/(1+e**-x)")
Relu = _unary("Relu", ops.relu, lambda ctx, g, x: g * _step(x), doc="y = max(x, 0)")
Softplus = _unary("Softplus", ops.softplus, lambda ctx, g, x: g * Sigmoid.apply(x), doc="y = ln(1+e**x)")


def _leaky_grad(ctx, g, x):
    slope, = ctx.params
    s = _step(x)
    return g * (s + (1.0 - s) * slope)


LeakyRelu = _unary("LeakyRelu", lambda c, gx, slope: ops.leaky_relu(c, gx, float(slope), False),
                   _leaky_grad, doc="y = x if x > 0 else slope*x")


def _elu_grad(ctx, g, x, y):
    s = _step(x)
    return g * (s + (1.0 - s) * (y + 1.0))


Elu = _unary("Elu", ops.elu, _elu_grad, "both", "y = x if x > 0 else e**x - 1")


def _silu_grad(ctx, g, x):
    return SiluBack.apply(g, x)


class SiluBack(Function):
    """GGML's silu_back: the gradient of silu at x, times g (gradient first)."""
    primitive = True

    @staticmethod
    def forward(ctx, g, x):
        step = step_of(g, x)
        ctx.save_for_backward(g, x)
        return like(step, ops.silu_back(step.context(), contiguous(step, g), contiguous(step, x)), x)

    @staticmethod
    def backward(ctx, gg):
        g, x = ctx.saved_tensors
        s = Sigmoid.apply(x)
        ds = s * (1.0 - s)
        # d/dx [g * (s + x s (1-s))] = g * (2 ds + x ds (1 - 2s))
        return gg * (s + x * ds), gg * g * (ds * 2.0 + x * ds * (1.0 - s * 2.0))


Silu = _unary("Silu", ops.silu, _silu_grad, doc="y = x * sigmoid(x)")

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _gelu_tanh_grad(ctx, g, x):
    """With s = sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): 1 + tanh(u) = 2s and 1 - tanh(u)^2 =
    4s(1-s), so the gradient is s + 2x s (1-s) u'. GGML's sigmoid is several times faster than its tanh."""
    x2 = x * x
    s = Sigmoid.apply((x + x2 * x * 0.044715) * (2.0 * _SQRT_2_OVER_PI))
    du = (x2 * 0.134145 + 1.0) * _SQRT_2_OVER_PI
    return g * (s + x * s * (1.0 - s) * du * 2.0)


def _gelu_erf_grad(ctx, g, x, y):
    """Phi(x) + x phi(x), with Phi(x) read off the forward's y = x Phi(x) as y / x (and 1/2 at x = 0)."""
    at_zero = 1.0 - Sqr.apply(Sgn.apply(x))
    cdf = (y + at_zero * 0.5) / (x + at_zero)
    pdf = Exp.apply(Sqr.apply(x) * -0.5)
    return g * (cdf + x * pdf * (1.0 / math.sqrt(2.0 * math.pi)))


GeluTanh = _unary("GeluTanh", ops.gelu, _gelu_tanh_grad, doc="tanh approximation of x * Phi(x)")
Gelu = _unary("Gelu", ops.gelu_erf, _gelu_erf_grad, "both", "y = x * Phi(x) (exact, erf)")


class Clamp(Function):
    """y = min(max(x, lo), hi); gradient 1 inside [lo, hi], 0 outside."""
    primitive = True

    @staticmethod
    def forward(ctx, x, lo, hi):
        step = step_of(x)
        ctx.lo, ctx.hi = lo, hi
        ctx.save_for_backward(x)
        # GGML's clamp writes into its input: clamp a copy
        copy = ops.dup(step.context(), contiguous(step, x))
        return like(step, ops.clamp(step.context(), copy, float(lo), float(hi)), x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        inside = 1.0 - _step(ctx.lo - x)   # x >= lo
        inside = inside * (1.0 - _step(x - ctx.hi))  # x <= hi
        return g * inside, None, None


class Cast(Function):
    """Convert between float32, float16, bfloat16 and int32; gradients cast back."""
    primitive = True

    @staticmethod
    def forward(ctx, x, dtype):
        step = step_of(x)
        ctx.in_dtype = x.dtype
        node = ops.cast(step.context(), contiguous(step, x), dtype)
        return emit(step, node, x.shape, dtype, x.device)

    @staticmethod
    def backward(ctx, g):
        return Cast.apply(g, ctx.in_dtype) if ctx.in_dtype.is_float else None, None


# ---- public functions --------------------------------------------------------------------------
def _in_f32(fn, x, *params):
    """Apply a float32 Function to x, computing float16/bfloat16 inputs in float32."""
    if x.dtype is f32:
        return fn.apply(x, *params)
    if not x.dtype.is_float:
        raise DTypeError(f"{fn.__name__.lower()}: expected a floating point tensor, got {x.dtype.name}; "
                         "use .float() first")
    return fn.apply(x.to(f32), *params).to(x.dtype)


def _unary_api(fn):
    def op(x):
        return _in_f32(fn, x)
    op.__name__ = fn.__name__.lower()
    op.__doc__ = fn.__doc__
    return op


exp = _unary_api(Exp)
log = _unary_api(Log)
sqrt = _unary_api(Sqrt)
sin = _unary_api(Sin)
cos = _unary_api(Cos)
tanh = _unary_api(Tanh)
sigmoid = _unary_api(Sigmoid)
relu = _unary_api(Relu)
silu = _unary_api(Silu)
softplus = _unary_api(Softplus)
square = _unary_api(Sqr)
sign = _unary_api(Sgn)


def neg(x):
    if x.dtype is i32:
        return neg(x.to(f32)).to(i32)
    return _in_f32(Neg, x)


def abs(x):  # noqa: A001 (PyTorch's name)
    if x.dtype is i32:
        return abs(x.to(f32)).to(i32)
    return _in_f32(Abs, x)


def rsqrt(x):
    return reciprocal(sqrt(x))


def reciprocal(x):
    return _in_f32(ScalarDiv, x, 1.0)


def leaky_relu(x, negative_slope=0.01):
    return _in_f32(LeakyRelu, x, float(negative_slope))


def elu(x, alpha=1.0):
    if alpha != 1.0:
        s = Step.apply(x)
        return relu(x) + (1.0 - s) * (exp(x) - 1.0) * alpha
    return _in_f32(Elu, x)


def gelu(x, approximate="none"):
    """GELU: x * Phi(x). `approximate="tanh"` uses the tanh formula, as in PyTorch."""
    if approximate == "none":
        return _in_f32(Gelu, x)
    if approximate == "tanh":
        return _in_f32(GeluTanh, x)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def clamp(x, min=None, max=None):  # noqa: A002 (PyTorch's names)
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    lo = -3.4028234663852886e38 if min is None else float(min)
    hi = 3.4028234663852886e38 if max is None else float(max)
    if x.dtype is i32:
        return clamp(x.to(f32), lo, hi).to(i32)
    return _in_f32(Clamp, x, lo, hi)


def _scalar_dtype(number, other):
    """A Python number takes the other operand's dtype, unless it is a float meeting an int tensor."""
    if other.dtype.is_float:
        return other.dtype
    return i32 if isinstance(number, numbers.Integral) else f32


def _tensor_operands(a, b, op):
    """Make both operands Tensors of one dtype (Python numbers become constants of a's dtype)."""
    if not isinstance(a, Tensor):
        a = full((), a, dtype=_scalar_dtype(a, b), device=b.device)
    if not isinstance(b, Tensor):
        b = full((), b, dtype=_scalar_dtype(b, a), device=a.device)
    if a.dtype is not b.dtype:
        if a.dtype.is_float and b.dtype.is_float:
            b = b.to(f32) if b.dtype is not f32 else b
            a = a.to(f32) if a.dtype is not f32 else a
        elif a.dtype.is_float:
            b = b.to(a.dtype)
        elif b.dtype.is_float:
            a = a.to(b.dtype)
    return a, b


def _binary(fn, a, b, op):
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError(f"{op}: at least one operand must be a Tensor")
    a, b = _tensor_operands(a, b, op)
    if a.dtype is i32:
        out = fn.apply(a.to(f32), b.to(f32))
        return out if fn is Div else out.to(i32)
    if a.dtype is not f32:
        return fn.apply(a.to(f32), b.to(f32)).to(a.dtype)
    return fn.apply(a, b)


def _is_number(x):
    return isinstance(x, numbers.Number)


def add(a, b, alpha=1):
    if alpha != 1:
        b = b * alpha
    if isinstance(a, Tensor) and _is_number(b) and a.dtype.is_float:
        return _in_f32(ScaleBias, a, 1.0, float(b))
    if isinstance(b, Tensor) and _is_number(a) and b.dtype.is_float:
        return _in_f32(ScaleBias, b, 1.0, float(a))
    return _binary(Add, a, b, "add")


def sub(a, b, alpha=1):
    if alpha != 1:
        b = b * alpha
    if isinstance(a, Tensor) and _is_number(b) and a.dtype.is_float:
        return _in_f32(ScaleBias, a, 1.0, -float(b))
    if isinstance(b, Tensor) and _is_number(a) and b.dtype.is_float:
        return _in_f32(ScaleBias, b, -1.0, float(a))
    return _binary(Sub, a, b, "sub")


def mul(a, b):
    if isinstance(a, Tensor) and _is_number(b) and a.dtype.is_float:
        return _in_f32(ScaleBias, a, float(b), 0.0)
    if isinstance(b, Tensor) and _is_number(a) and b.dtype.is_float:
        return _in_f32(ScaleBias, b, float(a), 0.0)
    return _binary(Mul, a, b, "mul")


def div(a, b):
    if isinstance(a, Tensor) and _is_number(b) and a.dtype.is_float:
        if b == 0:
            return _binary(Div, a, b, "div")
        return _in_f32(ScaleBias, a, 1.0 / float(b), 0.0)
    if isinstance(b, Tensor) and _is_number(a) and b.dtype.is_float:
        return _in_f32(ScalarDiv, b, float(a))
    return _binary(Div, a, b, "div")


class PowScalar(Function):
    """y = x ** p for a Python number p (negative x allowed for integer p)."""
    primitive = True

    @staticmethod
    def forward(ctx, x, p):
        ctx.p = p
        ctx.save_for_backward(x)
        return _pow_value(x, p)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * _pow_value(x, ctx.p - 1) * ctx.p, None


def _pow_value(x, p):
    if p == 0:
        return x * 0.0 + 1.0
    if p == 1:
        return x * 1.0
    if p == 2:
        return Sqr.apply(x)
    if p == 0.5:
        return Sqrt.apply(x)
    if p == -1:
        return ScalarDiv.apply(x, 1.0)
    magnitude = Exp.apply(Log.apply(Abs.apply(x)) * float(p))
    if float(p).is_integer() and int(p) % 2 == 1:
        return magnitude * Sgn.apply(x)
    return magnitude


def pow(x, p):  # noqa: A001 (PyTorch's name)
    if isinstance(x, Tensor) and _is_number(p):
        if x.dtype is i32:
            return pow(x.to(f32), p).to(i32)
        return _in_f32(PowScalar, x, float(p))
    if isinstance(p, Tensor) and _is_number(x):
        if x <= 0:
            raise ValueError(f"pow: a scalar base must be positive, got {x}")
        return exp(p * math.log(x))
    x, p = _tensor_operands(x, p, "pow")
    return exp(log(x) * p)
