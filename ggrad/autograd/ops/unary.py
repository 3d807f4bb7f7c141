"""Unary math and activations: one GGML op each, with the gradient rule beside it.

Each row of the table is a Primitive: `unary(name, builder, grad, saves)` where `builder(ggml_ctx,
x, *params)` makes the GGML node and `grad(ctx, g, *saved)` is the gradient. All compute in float32
(dtype rule FLOAT) unless the row says otherwise.
"""

import math

from ...ggml import bf16, f16, f32, kernels, ops
from ..autocast_hook import FLOAT32, autocast_op
from ..dtype_rules import FLOAT, INT_TO_FLOAT, NUMERIC
from .. import grad_mode
from ..function import apply_function
from ..lowering import choice, names
from ..memory import pending_graph
from ..primitive import Primitive
from ..tensor import Tensor
from ..torch_dtypes import BOOL
from ..declaration import declare


def unary(name, builder, grad, saves=None, doc="", dtypes=FLOAT):
    """A Primitive y = builder(ggml_ctx, x, *params) with gradient grad(ctx, g, *saved_tensors)."""
    def build(ctx, graph, x, *params):
        ctx.params = params
        return builder(graph.ctx, x, *params)

    def backward(ctx, g):
        return (grad(ctx, g, *ctx.saved_tensors),) + (None,) * len(ctx.params)

    return type(name, (Primitive,), {"build": staticmethod(build), "backward": staticmethod(backward),
                                     "saves": saves, "dtypes": dtypes, "__doc__": doc,
                                     "__module__": __name__})


def _zero(ctx, g, x):
    return g * 0.0


Neg = unary("Neg", ops.neg, lambda ctx, g: -g, doc="y = -x", dtypes=NUMERIC)
Abs = unary("Abs", ops.abs, lambda ctx, g, x: g * Sgn.apply(x), "input", "y = |x|", NUMERIC)
Sgn = unary("Sgn", ops.sgn, _zero, "input", "y = sign(x) (gradient 0)", NUMERIC)
Step = unary("Step", ops.step, _zero, "input", "y = 1 if x > 0 else 0 (the Heaviside step; gradient 0)")
Exp = unary("Exp", ops.exp, lambda ctx, g, y: g * y, "output", "y = e**x", INT_TO_FLOAT)
Log = unary("Log", ops.log, lambda ctx, g, x: g / x, "input", "y = ln x", INT_TO_FLOAT)
Sqrt = unary("Sqrt", ops.sqrt, lambda ctx, g, y: g * 0.5 / y, "output", "y = sqrt(x)", INT_TO_FLOAT)
Sqr = unary("Sqr", ops.sqr, lambda ctx, g, x: g * x * 2.0, "input", "y = x*x", NUMERIC)
Sin = unary("Sin", ops.sin, lambda ctx, g, x: g * Cos.apply(x), "input", "y = sin x", INT_TO_FLOAT)
Cos = unary("Cos", ops.cos, lambda ctx, g, x: -(g * Sin.apply(x)), "input", "y = cos x", INT_TO_FLOAT)
Tanh = unary("Tanh", ops.tanh, lambda ctx, g, y: g * (1.0 - y * y), "output", "y = tanh x", INT_TO_FLOAT)
Sigmoid = unary("Sigmoid", ops.sigmoid, lambda ctx, g, y: g * y * (1.0 - y), "output", "y = 1/(1+e**-x)",
                INT_TO_FLOAT)
Floor = unary("Floor", ops.floor, _zero, "input", "y = floor(x) (gradient 0)")
Ceil = unary("Ceil", ops.ceil, _zero, "input", "y = ceil(x) (gradient 0)")
Trunc = unary("Trunc", ops.trunc, _zero, "input", "y = trunc(x), towards zero (gradient 0)")
RoundAway = unary("RoundAway", ops.round, _zero, "input", "y = round(x), halves away from zero (GGML's)")


def _nan01(c, x):
    """1 where x is nan, else 0: clamp(-|x|, 0, 1), as GGML's clamp sends nan to its upper bound."""
    return ops.clamp(c, ops.neg(c, ops.abs(c, x)), 0.0, 1.0)


def _carry_nan(c, y, x):
    """y, and nan where x is nan (GGML's relu, leaky_relu, clamp and hardsigmoid give a number there;
    PyTorch's propagate the nan): y * d / d with d = 1, or 0 at a nan (0 * y / 0 is nan, also for an
    infinite y). Cheap elementwise ops only: tanh or sigmoid carriers cost 10-100x more per element."""
    d = ops.scale_bias(c, _nan01(c, x), -1.0, 1.0)
    return ops.div(c, ops.mul(c, y, d), d)


def _pos_or_nan(c, x):
    """1 where x > 0 or x is nan, else 0: ceil(clamp(x, 0, 1)) (clamp writes into its input: a copy)."""
    return ops.ceil(c, ops.clamp(c, ops.dup(c, x), 0.0, 1.0))


PosOrNan = unary("PosOrNan", _pos_or_nan, _zero, "input", "y = 1 where x > 0 or x is nan, else 0 (gradient 0)")
IsNan = unary("IsNan", _nan01, _zero, "input", "y = 1 where x is nan, else 0 (gradient 0)")


class ScaleBias(Primitive):
    """y = x * scale + bias for Python numbers scale and bias (one GGML node)."""
    dtypes = FLOAT

    @staticmethod
    def build(ctx, graph, x, scale, bias):
        ctx.scale = scale
        if bias == 0:
            return ops.scale(graph.ctx, x, float(scale))
        return ops.scale_bias(graph.ctx, x, float(scale), float(bias))

    @staticmethod
    def backward(ctx, g):
        return ScaleBias.apply(g, ctx.scale, 0.0), None, None


@choice("relu")
def _relu_node(graph, x):
    return _carry_nan(graph.ctx, ops.relu(graph.ctx, x), x)


@_relu_node.alternative("kernel", fits=lambda x: x.dtype is f32)
def _relu_by_kernel(graph, x):
    return kernels.relu_f32(graph.ctx, x)


@choice("relu")
def _relu_back_node(graph, g, x):
    return ops.mul(graph.ctx, g, _pos_or_nan(graph.ctx, x))


@_relu_back_node.alternative("kernel", fits=lambda g, x: x.dtype is f32 and g.dtype is f32)
def _relu_back_by_kernel(graph, g, x):
    return kernels.relu_back_f32(graph.ctx, g, x)


class Relu(Primitive):
    """y = max(x, 0), nan where x is nan, as PyTorch's relu (GGML's gives 0 at a nan): on the CPU ggrad's
    kernel, elsewhere GGML's relu with the nan carried (lowering.relu)."""
    dtypes = NUMERIC
    saves = "input"

    @staticmethod
    def build(ctx, graph, x):
        return _relu_node(graph, x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return ReluBack.apply(g, x) if g.dtype is x.dtype else g * PosOrNan.apply(x)


class ReluBack(Primitive):
    """PyTorch's relu gradient: g where x > 0 or x is nan (y <= 0 nowhere there), else 0. On the CPU ggrad's
    kernel, also 0 where g is not finite, as PyTorch; elsewhere g times PosOrNan(x) (lowering.relu), nan
    there (GGML has no select). Linear in g."""
    saves = (1,)

    @staticmethod
    def build(ctx, graph, g, x):
        return _relu_back_node(graph, g, x)

    @staticmethod
    def backward(ctx, gg):
        x, = ctx.saved_tensors
        return ReluBack.apply(gg, x), None


Softplus = unary("Softplus", ops.softplus, lambda ctx, g, x: g * Sigmoid.apply(x), "input", "y = ln(1+e**x)")


def _leaky_grad(ctx, g, x):
    slope, = ctx.params
    s = Step.apply(x)
    return g * (s + (1.0 - s) * slope)


LeakyRelu = unary("LeakyRelu", lambda c, x, slope: _carry_nan(c, ops.leaky_relu(c, x, float(slope), False), x),
                  _leaky_grad, "input", "y = x if x > 0 else slope*x (nan stays nan)")


def _elu_grad(ctx, g, x, y):
    s = Step.apply(x)
    return g * (s + (1.0 - s) * (y + 1.0))


Elu = unary("Elu", ops.elu, _elu_grad, "input+output", "y = x if x > 0 else e**x - 1")


class SiluBack(Primitive):
    """GGML's silu_back: the gradient of silu at x, times g (gradient first)."""
    dtypes = FLOAT
    saves = "inputs"

    @staticmethod
    def build(ctx, graph, g, x):
        return ops.silu_back(graph.ctx, g, x)

    @staticmethod
    def backward(ctx, gg):
        g, x = ctx.saved_tensors
        s = Sigmoid.apply(x)
        ds = s * (1.0 - s)
        # d/dx [g * (s + x s (1-s))] = g * (2 ds + x ds (1 - 2s))
        return gg * (s + x * ds), gg * g * (ds * 2.0 + x * ds * (1.0 - s * 2.0))


Silu = unary("Silu", ops.silu, lambda ctx, g, x: SiluBack.apply(g, x), "input", "y = x * sigmoid(x)")

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


def _gelu_tanh_grad(g, x, sqr, sigmoid, mul, affine):
    """With s = sigmoid(z), z = 2u = 2c (x + a x^3), c = sqrt(2/pi), a = 0.044715: 1 + tanh(u) = 2s and
    1 - tanh(u)^2 = 4s(1-s), so the gradient is g s (1 + h (1-s)) with h = x 2u' = 2c x (1 + 3a x^2).
    Eleven GGML nodes on the activation (`affine(t, scale, bias)` folds each affine step; sigmoid is
    several times faster than GGML's tanh). The last triple product is written as (a * b) * c with c made
    before a * b, so that its two MULs are adjacent in GGML's graph and CUDA runs them as one kernel (its
    fusion of MUL chains: 25 passes over the activation instead of 27). The first, h (1 - s), stays
    (x * h/x) * (1 - s): each order tried that paired both products planned one more activation-sized
    buffer live at once (the big GPT step's peak 2,641 -> 2,705 MiB, over PyTorch's; benchmarks/README).
    Written once over its operations: Tensor ops for a backward that is itself differentiated, GGML's
    nodes for the one-op gradient (GeluTanhBack), the same nodes."""
    c2 = 2.0 * _SQRT_2_OVER_PI
    x2 = sqr(x)
    s = sigmoid(mul(x, affine(x2, c2 * _GELU_A, c2)))
    h_1_s = mul(mul(x, affine(x2, 3.0 * c2 * _GELU_A, c2)), affine(s, -1.0, 1.0))   # h (1 - s)
    return mul(mul(g, affine(h_1_s, 1.0, 1.0)), s)


def _gelu_tanh_grad_in_place(g, x, sqr, sigmoid, mul, affine):
    """`_gelu_tanh_grad`'s value (same operations) ordered so that each node can be written into an
    operand's memory: g s first (into g), then (1 - s) x (into 1 - s), x^2 again as x's last reader (into
    x): three activation-sized buffers live at once, not four. GGML's allocator writes a node into an
    operand only where that operand is no view and has no later reader; `_unviewed` gives it such g and x."""
    c2 = 2.0 * _SQRT_2_OVER_PI
    s = sigmoid(mul(x, affine(sqr(x), c2 * _GELU_A, c2)))
    gs = mul(g, s)
    h_1_s = mul(mul(affine(s, -1.0, 1.0), x), affine(sqr(x), 3.0 * c2 * _GELU_A, c2))   # (1 - s) x 2c(1 + 3a x^2)
    return mul(gs, affine(h_1_s, 1.0, 1.0))


def _unviewed(c, g, x):
    """(g, x) as nodes that are no views, or None: where g is a reshape view of a product (a linear layer's
    input gradient, made 2-D) and x a float32 cast of a half tensor (autocast keeps GELU's input in half
    precision), the product itself and the half tensor cast anew in its shape. The composed gradient then
    plans 64 MiB less at the big GPT's autocast peak (benchmarks/README)."""
    base, half = g.view_source(), x.src(0)
    if g.op != "RESHAPE" or x.op != "CPY" or base is None or half is None or base.is_view or half.is_view:
        return None
    if base.dtype is not f32 or half.dtype.name not in ("f16", "bf16") or base.nelements != half.nelements:
        return None
    return base, ops.cast(c, ops.reshape_4d(c, half, *base.ne), f32)


def _gelu_erf_grad(ctx, g, x, y):
    """Phi(x) + x phi(x), with Phi(x) read off the forward's y = x Phi(x) as y / x (and 1/2 at x = 0)."""
    at_zero = 1.0 - Sqr.apply(Sgn.apply(x))
    cdf = (y + at_zero * 0.5) / (x + at_zero)
    pdf = Exp.apply(ScaleBias.apply(Sqr.apply(x), -0.5, -0.5 * math.log(2.0 * math.pi)))   # e^(-x^2/2) / sqrt(2 pi)
    return g * (cdf + x * pdf)


_GELU_FLAT = 20.0   # beyond +-20, x * sigmoid(z) is x or -0 in float32: sigmoid(z) rounds to 1 or 0


def _gelu_tanh_by_silu(c, x):
    """x sigmoid(z) = silu(z) / u with u = 2c (1 + a x^2) and z = x u: f32 ops only, vectorized exp.

    x is clamped to [-20, 20] inside (x u would overflow near 1e13) and what lies beyond is added back as
    d * step(d), d = x - clamp(x): gelu is x there, and inf and nan come out as in PyTorch."""
    c2 = 2.0 * _SQRT_2_OVER_PI
    inside = ops.clamp(c, ops.dup(c, x), -_GELU_FLAT, _GELU_FLAT)   # GGML's clamp writes into its input
    u = ops.scale_bias(c, ops.sqr(c, inside), c2 * _GELU_A, c2)
    y = ops.div(c, ops.silu(c, ops.mul(c, inside, u)), u)
    beyond = ops.sub(c, x, inside)
    return ops.add(c, y, ops.mul(c, beyond, ops.step(c, beyond)))


@choice("gelu_tanh")
def _gelu_tanh_node(graph, x):
    return ops.gelu(graph.ctx, x)


@_gelu_tanh_node.alternative("kernel", fits=lambda x: x.dtype is f32)
def _gelu_tanh_by_kernel(graph, x):
    return kernels.gelu_tanh_f32(graph.ctx, x)


@_gelu_tanh_node.alternative("silu", fits=lambda x: x.dtype is f32)
def _gelu_tanh_by_silu_node(graph, x):
    return _gelu_tanh_by_silu(graph.ctx, x)


@_gelu_tanh_node.alternative("half_kernel")
def _gelu_tanh_by_any_kernel(graph, x):
    return (kernels.gelu_tanh_f32 if x.dtype is f32 else kernels.gelu_tanh_half)(graph.ctx, x)


_takes_half = names("gelu_tanh", "half_kernel")


def _in_own_dtype_where_kernel(fn, args):
    """GELU's dtype rule: float16 and bfloat16 computed in their own dtype where the lowering's half kernels
    take them (the result rounded once from f32 inside, as PyTorch's), else FLOAT's float32 round trip."""
    x = args[0]
    if isinstance(x, Tensor) and x.dtype in (f16, bf16) and all(
            isinstance(a, Tensor) and a.dtype is x.dtype for a in args) and _takes_half(pending_graph(x.device)):
        return apply_function(fn, args)
    return FLOAT(fn, args)


@choice("gelu_tanh")
def _gelu_tanh_back_node(graph, g, x):
    c = graph.ctx
    nodes = (lambda t: ops.sqr(c, t), lambda t: ops.sigmoid(c, t), lambda a, b: ops.mul(c, a, b),
             lambda t, scale, bias: ops.scale_bias(c, t, scale, bias))
    unviewed = _unviewed(c, g, x)
    if unviewed is not None:
        return ops.reshape_4d(c, _gelu_tanh_grad_in_place(*unviewed, *nodes), *g.ne)
    return _gelu_tanh_grad(g, x, *nodes)


@_gelu_tanh_back_node.alternative("kernel")
def _gelu_tanh_back_by_kernel(graph, g, x):
    return kernels.gelu_tanh_back_f32(graph.ctx, g, x)


@_gelu_tanh_back_node.alternative("half_kernel")
def _gelu_tanh_back_by_any_kernel(graph, g, x):
    return (kernels.gelu_tanh_back_f32 if x.dtype is f32 else kernels.gelu_tanh_back_half)(graph.ctx, g, x)


_gelu_tanh_back_node.alternative("silu")(_gelu_tanh_back_node.default)   # the forward's composition: GGML's ops


class GeluTanh(Primitive):
    """tanh approximation of x * Phi(x): GGML's gelu; or in f32 where the lowering says so (GGML's CPU gelu
    reads an f16 table: errors up to 4e-3) ggrad's CPU kernel ("kernel", one pass each way) or the
    composition `_gelu_tanh_by_silu` ("silu", for RPC servers); float16 and bfloat16 in their own dtype where
    the lowering's half kernels take them ("half_kernel")."""
    saves = "input"
    dtypes = _in_own_dtype_where_kernel

    @staticmethod
    def build(ctx, graph, x):
        return _gelu_tanh_node(graph, x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        if g.dtype is x.dtype and not grad_mode.is_grad_enabled():
            return GeluTanhBack.apply(g, x)   # one op: f32, or half g and x where the forward ran in half
        if x.dtype is not f32:   # a recorded backward of the forward's half kernel: in f32, rounded once
            return _gelu_tanh_grad(g.float(), x.float(), Sqr.apply, Sigmoid.apply, lambda a, b: a * b,
                                   ScaleBias.apply).to(x.dtype)
        return _gelu_tanh_grad(g, x, Sqr.apply, Sigmoid.apply, lambda a, b: a * b, ScaleBias.apply)


class GeluTanhBack(Primitive):
    """g times GELU (tanh)'s derivative at x, one recorded op: ggrad's CPU kernel where the lowering says so,
    else `_gelu_tanh_grad`'s nodes, or `_gelu_tanh_grad_in_place`'s on `_unviewed` operands (no backward of
    its own: a backward that is itself differentiated takes `_gelu_tanh_grad` in Tensor ops)."""
    dtypes = _in_own_dtype_where_kernel

    @staticmethod
    def build(ctx, graph, g, x):
        return _gelu_tanh_back_node(graph, g, x)


Gelu = unary("Gelu", ops.gelu_erf, _gelu_erf_grad, "input+output", "y = x * Phi(x) (exact, erf)")


class Clamp(Primitive):
    """y = min(max(x, lo), hi); gradient 1 inside [lo, hi], 0 outside."""
    dtypes = NUMERIC
    saves = "input"

    @staticmethod
    def build(ctx, graph, x, lo, hi):
        ctx.lo, ctx.hi = lo, hi
        # GGML's clamp writes into its input: clamp a copy
        return ops.clamp(graph.ctx, ops.dup(graph.ctx, x), float(lo), float(hi))

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        inside = (1.0 - Step.apply(ctx.lo - x)) * (1.0 - Step.apply(x - ctx.hi))   # lo <= x <= hi
        return g * inside, None, None


class ClampNumbers(Primitive):
    """PyTorch's clamp with number bounds (+-inf where a bound is missing): nan stays nan; gradient 1
    where lo <= x <= hi, 0 elsewhere and at nan."""
    dtypes = NUMERIC
    saves = "input"

    @staticmethod
    def build(ctx, graph, x, lo, hi):
        ctx.lo, ctx.hi = lo, hi
        c = graph.ctx
        return _carry_nan(c, ops.clamp(c, ops.dup(c, x), float(lo), float(hi)), x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        inside = (1.0 - Step.apply(ctx.lo - x)) * (1.0 - Step.apply(x - ctx.hi)) - IsNan.apply(x)
        return g * inside, None, None


class Cast(Primitive):
    """Convert between float32, float16, bfloat16 and int32; gradients cast back."""

    @staticmethod
    def build(ctx, graph, x, dtype):
        ctx.in_dtype = x.dtype
        return ops.cast(graph.ctx, x, dtype)

    @staticmethod
    def result_dtype(x, dtype):
        return dtype

    @staticmethod
    def backward(ctx, g):
        return cast(g, ctx.in_dtype) if ctx.in_dtype.is_float else None, None


# ---- public functions ----------------------------------------------------------------------------
def _public(fn, name):
    def op(x):
        return fn.apply(x)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = fn.__doc__
    return op


exp = autocast_op("exp", FLOAT32)(_public(Exp, "exp"))
declare(exp, method=True, inplace=True)
log = autocast_op("log", FLOAT32)(_public(Log, "log"))
declare(log, method=True, inplace=True)
sqrt = _public(Sqrt, "sqrt")
declare(sqrt, method=True, inplace=True)
sin = _public(Sin, "sin")
declare(sin, method=True)
cos = _public(Cos, "cos")
declare(cos, method=True)
tanh = _public(Tanh, "tanh")
declare(tanh, method=True, inplace=True)
sigmoid = _public(Sigmoid, "sigmoid")
declare(sigmoid, method=True, inplace=True)
relu = _public(Relu, "relu")
declare(relu, method=True, inplace=True)
silu = _public(Silu, "silu")
declare(silu, method=True)
softplus = _public(Softplus, "softplus")
square = _public(Sqr, "square")
declare(square, method=True)
sign = _public(Sgn, "sign")
declare(sign, method=True)
@declare(method=True, inplace=True)
def neg(x):
    """-x; a bool tensor is refused, as PyTorch."""
    if isinstance(x, Tensor) and x.dtype is BOOL:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
                           "to invert a mask, use the `~` or `logical_not()` operator instead.")
    return Neg.apply(x)
abs = _public(Abs, "abs")  # noqa: A001 (PyTorch's name)
declare(abs, method=True, inplace=True)


@declare(method=True)
def leaky_relu(x, negative_slope=0.01):
    return LeakyRelu.apply(x, float(negative_slope))


@declare(method=True)
def gelu(x, approximate="none"):
    """GELU: x * Phi(x). `approximate="tanh"` uses the tanh formula, as in PyTorch."""
    if approximate == "none":
        return Gelu.apply(x)
    if approximate == "tanh":
        return GeluTanh.apply(x)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


_F32_MAX = 3.4028234663852886e38


def clamp(x, min=None, max=None):  # noqa: A002 (PyTorch's names)
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    lo = -math.inf if min is None else float(min)
    hi = math.inf if max is None else float(max)
    return ClampNumbers.apply(x, lo, hi)


def cast(x, dtype):
    """x converted to `dtype` (the autograd-aware conversion behind `Tensor.to(dtype)`)."""
    return x if x.dtype is dtype else Cast.apply(x, dtype)

