"""Neural-network ops: softmax family, normalisation, dropout, convolution, pooling.

Softmax is GGML's `soft_max_ext` (scale, additive mask, ALiBi `max_bias`) differentiated with
`soft_max_ext_back`; rms_norm uses `rms_norm_back`; layer_norm's backward is composed; convolutions
are im2col + mul_mat with `im2col_back`; pooling uses `pool_2d_back`.
"""

from ...ggml import f32, kernels, ops
from ...ggml.errors import ShapeError
from ..autocast_hook import FLOAT32, autocast_op
from ..dtype_rules import as_float32
from .. import grad_mode
from ..function import Function
from ..pending import ne_of
from ..lowering import choice
from ..primitive import Primitive, one_op_gradient
from ..tensor import _axis
from ..torch_dtypes import resolve
from ..factory import bernoulli_mask
from . import unary as un
from . import reduce as rd
from . import views as mv
from . import windows
from .broadcast import broadcast_shapes, full_operand, leading_sums_node, reduce_to, row_sums_node
from .products import matmul_nt
from ..grad_api import composite_vjp
from ..declaration import declare


@choice("softmax")
def softmax_node(graph, x, mask, scale, max_bias=0.0):
    """The node of softmax(x * scale + mask (+ ALiBi slopes)) over dimension 0: GGML's soft_max_ext, or
    ggrad's CPU kernel where the lowering says so (f32, no ALiBi)."""
    return ops.soft_max_ext(graph.ctx, x, mask, float(scale), float(max_bias))


def _kernel_takes(x, mask, scale, max_bias=0.0):
    return not max_bias and x.dtype is f32 and (mask is None or mask.dtype is f32)


@softmax_node.alternative("kernel", fits=_kernel_takes)
def _softmax_by_kernel(graph, x, mask, scale, max_bias=0.0):
    return kernels.softmax_f32(graph.ctx, x, mask, float(scale))


class SoftmaxExt(Primitive):
    """softmax(x * scale + mask (+ ALiBi slopes)) over the last dimension."""
    saves = "output"

    @staticmethod
    def build(ctx, graph, x, mask, scale, max_bias):
        ctx.scale = scale
        return softmax_node(graph, x, mask, scale, max_bias)

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        # ALiBi only shifts the forward's logits by constants: the backward is that of plain scaled softmax
        return SoftmaxBack.apply(g, y, ctx.scale), None, None, None


class SoftmaxBack(Primitive):
    """GGML's soft_max_ext_back(g, y, scale): the gradient of a scaled softmax with output y,
    scale * y * (g - sum(g * y)). Its own gradient (create_graph): the map is symmetric in g, so
    for g it is itself; for y, scale * (gg * (g - sum(g y)) - g * sum(gg y))."""
    saves = "inputs"

    @staticmethod
    def build(ctx, graph, g, y, scale):
        ctx.scale = scale
        return ops.soft_max_ext_back(graph.ctx, g, y, float(scale), 0.0)

    @staticmethod
    def backward(ctx, gg):
        g, y = ctx.saved_tensors
        dy = (gg * (g - rd.SumRows.apply(g * y)) - g * rd.SumRows.apply(gg * y)) * ctx.scale
        return SoftmaxBack.apply(gg, y, ctx.scale), dy, None


@declare()
def softmax_ext(x, mask=None, scale=1.0, max_bias=0.0):
    """Scaled, masked softmax over the last dimension, as GGML's soft_max_ext.

    Args:
        x: scores (..., rows, cols).
        mask: optional additive mask (rows', cols) with rows' >= rows, broadcast over batch; constant.
        scale: multiplies x before the mask is added.
        max_bias: ALiBi maximum bias (0 disables); heads are x's third-from-last dimension.
    """
    x = as_float32(x, "softmax")
    if mask is not None:
        if mask.requires_grad:
            raise ValueError("softmax_ext: the mask is a constant; detach it (gradients do not flow into it)")
        mask = as_float32(mask, "softmax mask")
        if x.ndim < 2 or mask.shape[-1] != x.shape[-1] or mask.ndim < 2 or mask.shape[-2] < x.shape[-2]:
            raise ShapeError(f"softmax_ext: mask of shape {mask.shape} does not fit scores of shape {x.shape}")
        if mask.ndim > 2 or x.ndim > 2:
            broadcast_shapes(x.shape[:-2], mask.shape[:-2], "softmax_ext mask")
    return SoftmaxExt.apply(x, mask, scale, max_bias)


@declare(method=True)
@autocast_op("softmax", FLOAT32)
def softmax(x, dim=-1, dtype=None):
    if dtype is not None:  # as PyTorch: the input is cast to dtype before the op
        x = x.to(resolve(dtype))
    d = _axis(dim, x.ndim)
    if d == x.ndim - 1 or x.ndim == 0:
        return softmax_ext(x).to(x.dtype) if x.dtype.is_float and x.dtype is not f32 else softmax_ext(x)
    return mv.transpose(softmax(mv.transpose(x, d, -1), -1), d, -1)


class LogSoftmax(Function):
    """log softmax over the last dimension; backward g - softmax * sum(g)."""

    @staticmethod
    def forward(ctx, x):
        z = x - rd.RowMax.apply(x)
        out = z - un.log(rd.SumRows.apply(un.exp(z)))
        ctx.save_for_backward(out)   # the output: create_graph differentiates through it
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return g - un.exp(out) * rd.SumRows.apply(g)


@declare(method=True)
@autocast_op("log_softmax", FLOAT32)
def log_softmax(x, dim=-1, dtype=None):
    if dtype is not None:
        x = x.to(resolve(dtype))
    x = as_float32(x, "log_softmax")
    if x.ndim == 0:   # a scalar is its own one-element row, as PyTorch's (log_softmax = 0)
        _axis(dim, 1)
        return mv.reshape(log_softmax(mv.reshape(x, 1)), ())
    d = _axis(dim, x.ndim)
    if d == x.ndim - 1:
        return LogSoftmax.apply(x)
    return mv.transpose(LogSoftmax.apply(mv.transpose(x, d, -1)), d, -1)


class _RowNorm(Primitive):
    """A GGML normalisation over the last dimension (`op(ggml_ctx, x, eps)`), keeping x for backward."""
    saves = "input"
    op = None

    @classmethod
    def build(cls, ctx, graph, x, eps):
        ctx.eps = eps
        return cls.op(graph.ctx, x, float(eps))


@choice("layer_norm")
def _layer_norm_core_node(graph, x, eps):
    return ops.norm(graph.ctx, x, float(eps))


@_layer_norm_core_node.alternative("kernel", fits=lambda x, eps: x.dtype is f32)
def _layer_norm_core_by_kernel(graph, x, eps):
    return kernels.layer_norm_f32(graph.ctx, x, eps)


@choice("layer_norm")
def _layer_norm_back_node(graph, g, x, eps):
    c = graph.ctx
    return _layer_norm_grad(g, x, eps, x.ne[0], lambda t: row_sums_node(graph, t),
                            lambda t, s: ops.scale(c, t, s), lambda a, b: ops.sub(c, a, full_operand(graph, a, b)),
                            lambda a, b, e: ops.rms_norm_back(c, a, b, float(e)))


@_layer_norm_back_node.alternative("kernel")
def _layer_norm_back_by_kernel(graph, g, x, eps):
    return kernels.layer_norm_back_f32(graph.ctx, g, x, eps)


@choice("layer_norm")
def _layer_norm_affine_node(graph, x, w, b, eps):
    """The core's node times w plus b; ggrad's kernel does the three in one node."""
    return ops.add(graph.ctx, ops.mul(graph.ctx, _layer_norm_core_node(graph, x, eps), w), b)


@_layer_norm_affine_node.alternative("kernel")
def _layer_norm_affine_by_kernel(graph, x, w, b, eps):
    return kernels.layer_norm_affine_f32(graph.ctx, x, w, b, float(eps))


class LayerNormCore(_RowNorm):
    """(x - mean) / sqrt(var + eps) over the last dimension: GGML norm, or ggrad's CPU kernel where the
    lowering says so (one pass each way).

    Backward: the normalised value is rms_norm of the centred input, so GGML's rms_norm_back gives the
    gradient with respect to the centred input, and centring's own backward subtracts the row mean (also
    where the kernel's gradient is not taken: a backward that is itself recorded, create_graph).
    """
    op = staticmethod(ops.norm)

    @classmethod
    def build(cls, ctx, graph, x, eps):
        ctx.eps = eps
        return _layer_norm_core_node(graph, x, eps)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        if one_op_gradient(g, x):
            return LayerNormCoreBack.apply(g, x, ctx.eps), None
        return _layer_norm_grad(g, x, ctx.eps, x.shape[-1], rd.SumRows.apply, lambda t, c: t * c,
                                lambda a, b: a - b, RMSNormBack.apply), None


def _layer_norm_grad(g, x, eps, n, row_sums, scale, sub, rms_norm_back):
    """LayerNormCore's gradient at x: rms_norm_back's at the centred x, centred in its turn. Written once over
    its operations: Tensor ops for a backward that is itself differentiated, GGML's nodes for the one-op
    gradient (LayerNormCoreBack), the same nodes."""
    inv_n = 1.0 / n
    centered = sub(x, scale(row_sums(x), inv_n))
    g_centered = rms_norm_back(g, centered, eps)
    return sub(g_centered, scale(row_sums(g_centered), inv_n))


class LayerNormCoreBack(Primitive):
    """The gradient of LayerNormCore at x given g, one recorded op: ggrad's CPU kernel where the lowering says
    so, else `_layer_norm_grad`'s nodes (no backward of its own: a backward that is itself differentiated
    takes `_layer_norm_grad` in Tensor ops)."""

    @staticmethod
    def build(ctx, graph, g, x, eps):
        return _layer_norm_back_node(graph, g, x, eps)

    @staticmethod
    def shape(g, x, eps):
        return x.shape


def _normalize_trailing(core, x, normalized_shape, eps, op):
    """Apply a last-dimension normaliser `core` over the trailing `normalized_shape` dimensions."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    if x.shape[x.ndim - len(normalized_shape):] != normalized_shape:
        raise ShapeError(f"{op}: normalized_shape {normalized_shape} does not match the end of input "
                         f"shape {x.shape}")
    src = as_float32(x, op)
    if len(normalized_shape) == 1:
        return core.apply(src, eps)
    flat = mv.reshape(src, x.shape[:x.ndim - len(normalized_shape)] + (-1,))
    return mv.reshape(core.apply(flat, eps), x.shape)


class LayerNormAffine(Primitive):
    """layer_norm over the last dimension with its weight and bias, one recorded op: LayerNormCore's node
    times w plus b (three recorded ops otherwise; one node where the lowering has the kernel). Backward: one op for the wanted gradients of x, w and b
    (LayerNormAffineGrads; five ops otherwise)."""
    saves = (0, 1)

    @staticmethod
    def build(ctx, graph, x, w, b, eps):
        return _layer_norm_affine_node(graph, x, w, b, eps)

    @classmethod
    def saved(cls, ctx, args, out):
        ctx.eps = args[3]
        return args[0], args[1]

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        needs = ctx.needs_input_grad[:3]
        if grad_mode.is_grad_enabled():   # create_graph: the gradients in differentiable ops
            dx, dw = composite_vjp(lambda x, w: LayerNormCore.apply(x, ctx.eps) * w, (x, w), needs[:2], g)
            return dx, dw, reduce_to(g, w.shape) if needs[2] else None, None
        grads = iter(LayerNormAffineGrads.apply(g, x, w, ctx.eps, needs))
        return tuple(next(grads) if need else None for need in needs) + (None,)


class LayerNormAffineGrads(Primitive):
    """LayerNormAffine's wanted gradients given g, as one recorded op: x's (LayerNormCoreBack's of g * w), w's
    (the sums of g times the normalised x, recomputed rather than kept from the forward) and b's (g's sums),
    the sums as the backend takes them (broadcast.leading_sums_node)."""
    multiple_results = True

    @staticmethod
    def build(ctx, graph, g, x, w, eps, needs):
        grads = []
        if needs[0]:
            grads.append(LayerNormCoreBack.build(ctx, graph, ops.mul(graph.ctx, g, w), x, eps))
        if needs[1]:
            y = LayerNormCore.build(ctx, graph, x, eps)
            grads.append(leading_sums_node(graph, ops.mul(graph.ctx, g, y), (x.ne[0],)))
        if needs[2]:
            grads.append(leading_sums_node(graph, g, (x.ne[0],)))
        return tuple(grads)

    @staticmethod
    def shape(g, x, w, eps, needs):
        return tuple(s for s, need in zip((x.shape, w.shape, w.shape), needs) if need)

    @staticmethod
    def result_dtype(g, x, w, eps, needs):
        return (f32,) * sum(bool(n) for n in needs)


def _affine_in_one_op(x, normalized_shape, weight, bias):
    """Whether layer_norm's call is LayerNormAffine's: float32 x of at most 4 dimensions normalised over its
    last, by a float32 weight and bias of that size."""
    n = normalized_shape if isinstance(normalized_shape, int) else \
        (normalized_shape[0] if len(normalized_shape) == 1 else None)
    return (weight is not None and bias is not None and x.dtype is f32 and weight.dtype is f32
            and bias.dtype is f32 and 0 < x.ndim <= 4 and x.shape[-1] == n
            and weight.shape == (n,) and bias.shape == (n,))


@declare()
@autocast_op("layer_norm", FLOAT32)
def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    if _affine_in_one_op(x, normalized_shape, weight, bias):
        return LayerNormAffine.apply(x, weight, bias, eps)
    y = _normalize_trailing(LayerNormCore, x, normalized_shape, eps, "layer_norm")
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y if x.dtype is f32 else y.to(x.dtype)


class RMSNormCore(_RowNorm):
    """x / sqrt(mean(x^2) + eps) over the last dimension; backward is GGML's rms_norm_back."""
    op = staticmethod(ops.rms_norm)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return RMSNormBack.apply(g, x, ctx.eps), None


class RMSNormBack(Primitive):
    """GGML's rms_norm_back(dy, x, eps): the gradient of rms_norm at x (gradient first),
    r dy - x r^3 mean(dy x) with r = 1 / sqrt(mean(x^2) + eps); differentiated as that formula."""
    saves = "inputs"

    @staticmethod
    def build(ctx, graph, g, x, eps):
        ctx.eps = eps
        return ops.rms_norm_back(graph.ctx, g, x, float(eps))

    @staticmethod
    def shape(g, x, eps):
        return x.shape

    @staticmethod
    def backward(ctx, gg):
        eps = ctx.eps

        def formula(g, x):
            n = x.shape[-1]
            r = 1.0 / un.sqrt(rd.SumRows.apply(x * x) * (1.0 / n) + eps)
            return g * r - x * (r * r * r) * (rd.SumRows.apply(g * x) * (1.0 / n))
        return composite_vjp(formula, ctx.saved_tensors, ctx.needs_input_grad[:2], gg) + (None,)


@declare()
@autocast_op("rms_norm", FLOAT32)
def rms_norm(x, normalized_shape, weight=None, eps=1e-6):
    y = _normalize_trailing(RMSNormCore, x, normalized_shape, 1e-6 if eps is None else eps, "rms_norm")
    y = y if weight is None else y * weight
    return y if x.dtype is f32 else y.to(x.dtype)


@declare()
def dropout(x, p=0.5, training=True):
    """Zero each element with probability p and scale the rest by 1/(1-p) (mask drawn on the host)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    mask = bernoulli_mask(x.shape, 1.0 - p, scale=1.0 / (1.0 - p), device=x.device)
    return x * mask


# ---- convolution and pooling -------------------------------------------------------------------
class Im2Col(Primitive):
    """Unfold input patches (GGML im2col): (N, C, H, W) -> (N, OH, OW, C*KH*KW); backward im2col_back."""

    @staticmethod
    def build(ctx, graph, x, kernel_shape, stride, padding, dilation, is_2d):
        ctx.args = (kernel_shape, stride, padding, dilation, is_2d)
        kernel = graph.shape_only(kernel_shape)
        s, p, d = stride, padding, dilation
        return ops.im2col(graph.ctx, kernel, x, s[1], s[0], p[1], p[0], d[1], d[0], is_2d, f32)

    @staticmethod
    def shape(x, kernel_shape, stride, padding, dilation, is_2d):
        def out(size, k, s, p, d):
            return (size + 2 * p - d * (k - 1) - 1) // s + 1
        cols = x.shape[1] * kernel_shape[-1] * (kernel_shape[-2] if is_2d else 1)
        ow = out(x.shape[-1], kernel_shape[-1], stride[1], padding[1], dilation[1])
        if not is_2d:
            return (x.shape[0], ow, cols)
        oh = out(x.shape[-2], kernel_shape[-2], stride[0], padding[0], dilation[0])
        return (x.shape[0], oh, ow, cols)

    @staticmethod
    def result_dtype(*args):
        return f32

    @staticmethod
    def backward(ctx, g):
        return (Im2ColBack.apply(g, ctx.shapes[0], *ctx.args),) + (None,) * 5


class Im2ColBack(Primitive):
    """GGML's im2col_back: the patches' gradient summed back into the input's shape."""

    @staticmethod
    def build(ctx, graph, g, in_shape, kernel_shape, s, p, d, is_2d):
        ctx.args = (kernel_shape, s, p, d, is_2d)
        kernel = graph.shape_only(kernel_shape)
        return ops.im2col_back(graph.ctx, g, kernel, ne_of(in_shape), s[1], s[0], p[1], p[0], d[1], d[0], is_2d)

    @staticmethod
    def shape(g, in_shape, *args):
        return in_shape

    @staticmethod
    def backward(ctx, gg):   # linear in g: its gradient is the adjoint, im2col itself
        return (Im2Col.apply(gg, *ctx.args),) + (None,) * 6


def _pair(v, n, name):
    if isinstance(v, int):
        return (v,) * n
    v = tuple(v)
    if len(v) != n:
        raise ValueError(f"{name}: expected {n} values, got {v}")
    return v


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1):
    """2-D convolution of x (N, C, H, W) with weight (O, C, KH, KW)."""
    if x.ndim != 4 or weight.ndim != 4:
        raise ShapeError(f"conv2d: expected 4-D input and weight, got {x.shape} and {weight.shape}")
    if x.shape[1] != weight.shape[1]:
        raise ShapeError(f"conv2d: input has {x.shape[1]} channels but weight expects {weight.shape[1]}")
    s, p, d = _pair(stride, 2, "stride"), _pair(padding, 2, "padding"), _pair(dilation, 2, "dilation")
    n, o = x.shape[0], weight.shape[0]
    cols = Im2Col.apply(as_float32(x, "conv2d"), weight.shape, s, p, d, True)   # (N, OH, OW, C*KH*KW)
    oh, ow = cols.shape[1], cols.shape[2]
    flat = mv.reshape(cols, n * oh * ow, cols.shape[3])
    out = matmul_nt(flat, mv.reshape(weight, o, -1))                          # (N*OH*OW, O)
    out = mv.permute(mv.reshape(out, n, oh * ow, o), 0, 2, 1)
    out = mv.reshape(mv.contiguous(out), n, o, oh, ow)
    if bias is not None:
        out = out + mv.reshape(bias, 1, o, 1, 1)
    return out


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1):
    """1-D convolution of x (N, C, L) with weight (O, C, K)."""
    if x.ndim != 3 or weight.ndim != 3:
        raise ShapeError(f"conv1d: expected 3-D input and weight, got {x.shape} and {weight.shape}")
    if x.shape[1] != weight.shape[1]:
        raise ShapeError(f"conv1d: input has {x.shape[1]} channels but weight expects {weight.shape[1]}")
    s = (1, _pair(stride, 1, "stride")[0])
    p = (0, _pair(padding, 1, "padding")[0])
    d = (1, _pair(dilation, 1, "dilation")[0])
    n, o = x.shape[0], weight.shape[0]
    cols = Im2Col.apply(as_float32(x, "conv1d"), weight.shape, s, p, d, False)  # (N, OL, C*K)
    ol = cols.shape[1]
    out = matmul_nt(mv.reshape(cols, n * ol, cols.shape[2]), mv.reshape(weight, o, -1))
    out = mv.reshape(mv.contiguous(mv.permute(mv.reshape(out, n, ol, o), 0, 2, 1)), n, o, ol)
    if bias is not None:
        out = out + mv.reshape(bias, 1, o, 1)
    return out


class Pool2d(Primitive):
    """GGML pool_2d (max or avg) over (N, C, H, W); backward pool_2d_back."""
    saves = "input"

    @staticmethod
    def build(ctx, graph, x, op, kernel, stride, padding):
        ctx.args = (op, kernel, stride, padding)
        k, s, p = kernel, stride, padding
        return ops.pool_2d(graph.ctx, x, op, k[1], k[0], s[1], s[0], float(p[1]), float(p[0]))

    @staticmethod
    def shape(x, op, kernel, stride, padding):
        oh = (x.shape[2] + 2 * padding[0] - kernel[0]) // stride[0] + 1
        ow = (x.shape[3] + 2 * padding[1] - kernel[1]) // stride[1] + 1
        return (x.shape[0], x.shape[1], oh, ow)

    @staticmethod
    def result_dtype(*args):
        return f32

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return (Pool2dBack.apply(g, x, *ctx.args),) + (None,) * 4


class Pool2dBack(Primitive):
    """GGML's pool_2d_back(g, x, ...): the pooled gradient spread back over x's shape."""
    views = True

    @staticmethod
    def build(ctx, graph, g, x, op, k, s, p):
        ctx.args = (op, k, s, p)
        g = ops.cont(graph.ctx, g) if not g.is_contiguous else g
        return ops.pool_2d_back(graph.ctx, g, x, op, k[1], k[0], s[1], s[0], float(p[1]), float(p[0]))

    @staticmethod
    def shape(g, x, *args):
        return x.shape

    @staticmethod
    def backward(ctx, gg):
        """Average pooling's backward is linear in g with the pooling as its adjoint. Max pooling's would
        gather gg at each window's argmax, which GGML has no op for: it raises rather than guess."""
        op = ctx.args[0]
        if op != "avg":
            raise RuntimeError(f"{op}_pool2d: its backward (GGML's pool_2d_back) has no gradient of its own, so a "
                               f"gradient computed through it with create_graph=True cannot be differentiated "
                               f"again")
        return (Pool2d.apply(gg, *ctx.args), None) + (None,) * 4


def _pool(x, op, kernel_size, stride, padding):
    name = f"{op}_pool2d"
    if x.ndim != 4:
        raise ShapeError(f"{name}: expected 4-D input (N, C, H, W), got {x.shape}")
    k, s, p, d = windows.pool_settings(name, 2, kernel_size, stride, padding, 1)
    windows.pool_outs(name, x.shape, k, s, p, d, False)
    return Pool2d.apply(as_float32(x, name), op, k, s, p)


@declare()
def max_pool2d(x, kernel_size, stride=None, padding=0):
    return _pool(x, "max", kernel_size, stride, padding)


@declare()
def avg_pool2d(x, kernel_size, stride=None, padding=0):
    return _pool(x, "avg", kernel_size, stride, padding)
