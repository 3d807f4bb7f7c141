"""Neural-network ops: softmax family, normalisation, dropout, convolution, pooling.

Softmax is GGML's `soft_max_ext` (scale, additive mask, ALiBi `max_bias`) differentiated with
`soft_max_ext_back`; rms_norm uses `rms_norm_back`; layer_norm's backward is composed; convolutions
are im2col + mul_mat with `im2col_back`; pooling uses `pool_2d_back`.
"""

from ...ggml import f32, ops
from ...ggml.errors import DTypeError, ShapeError
from ..function import Function
from ..nodes import alias, arg, contiguous, emit, like, ne_of, step_of
from . import elementwise as ew
from . import movement as mv
from . import reduce as rd
from .linalg import matmul_nt
from ..tensor import _axis
from ..factory import bernoulli_mask


def _float32(x, op):
    if not x.dtype.is_float:
        raise DTypeError(f"{op}: expected a floating point tensor, got {x.dtype.name}")
    return x if x.dtype is f32 else x.to(f32)


class SoftmaxExt(Function):
    """softmax(x * scale + mask (+ ALiBi slopes)) over the last dimension."""
    primitive = True

    @staticmethod
    def forward(ctx, x, mask, scale, max_bias):
        step = step_of(x) if mask is None else step_of(x, mask)
        ctx.scale, ctx.max_bias = scale, max_bias
        gmask = None if mask is None else contiguous(step, mask)
        node = ops.soft_max_ext(step.context(), contiguous(step, x), gmask, float(scale), float(max_bias))
        y = like(step, node, x)
        ctx.save_for_backward(alias(y))
        return y

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        step = step_of(g, y)
        # ALiBi only shifts the forward's logits by constants: the backward is that of plain scaled softmax
        node = ops.soft_max_ext_back(step.context(), contiguous(step, g), contiguous(step, y), float(ctx.scale), 0.0)
        return like(step, node, g), None, None, None


def softmax_ext(x, mask=None, scale=1.0, max_bias=0.0):
    """Scaled, masked softmax over the last dimension, as GGML's soft_max_ext.

    Args:
        x: scores (..., rows, cols).
        mask: optional additive mask (rows', cols) with rows' >= rows, broadcast over batch; constant.
        scale: multiplies x before the mask is added.
        max_bias: ALiBi maximum bias (0 disables); heads are x's third-from-last dimension.
    """
    x = _float32(x, "softmax")
    if mask is not None:
        if mask.requires_grad:
            raise ValueError("softmax_ext: the mask is a constant; detach it (gradients do not flow into it)")
        mask = _float32(mask, "softmax mask")
        if x.ndim < 2 or mask.shape[-1] != x.shape[-1] or mask.ndim < 2 or mask.shape[-2] < x.shape[-2]:
            raise ShapeError(f"softmax_ext: mask of shape {mask.shape} does not fit scores of shape {x.shape}")
        if mask.ndim > 2 or x.ndim > 2:
            ew.broadcast_shapes(x.shape[:-2], mask.shape[:-2], "softmax_ext mask")
    return SoftmaxExt.apply(x, mask, scale, max_bias)


def softmax(x, dim=-1):
    d = _axis(dim, x.ndim)
    if d == x.ndim - 1 or x.ndim == 0:
        return softmax_ext(x).to(x.dtype) if x.dtype.is_float and x.dtype is not f32 else softmax_ext(x)
    return mv.transpose(softmax(mv.transpose(x, d, -1), -1), d, -1)


class LogSoftmax(Function):
    """log softmax over the last dimension; backward g - softmax * sum(g)."""

    @staticmethod
    def forward(ctx, x):
        z = x - rd.RowMax.apply(x)
        out = z - ew.log(rd.SumRows.apply(ew.exp(z)))
        ctx.save_for_backward(out.detach())
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return g - ew.exp(out) * rd.SumRows.apply(g)


def log_softmax(x, dim=-1):
    x = _float32(x, "log_softmax")
    d = _axis(dim, x.ndim)
    if d == x.ndim - 1:
        return LogSoftmax.apply(x)
    return mv.transpose(LogSoftmax.apply(mv.transpose(x, d, -1)), d, -1)


class _RowNorm(Function):
    """A GGML normalisation over the last dimension (`op(ctx, x, eps)`), keeping x for backward."""
    primitive = True
    op = None

    @classmethod
    def forward(cls, ctx, x, eps):
        step = step_of(x)
        ctx.eps = eps
        ctx.save_for_backward(x)
        return like(step, cls.op(step.context(), contiguous(step, x), float(eps)), x)


class LayerNormCore(_RowNorm):
    """(x - mean) / sqrt(var + eps) over the last dimension (GGML norm).

    Backward: the normalised value is rms_norm of the centred input, so GGML's rms_norm_back gives the
    gradient with respect to the centred input, and centring's own backward subtracts the row mean.
    """
    op = staticmethod(ops.norm)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        n = x.shape[-1]
        centered = x - rd.SumRows.apply(x) * (1.0 / n)
        g_centered = RMSNormBack.apply(g, centered, ctx.eps)
        return g_centered - rd.SumRows.apply(g_centered) * (1.0 / n), None


def _normalize_trailing(core, x, normalized_shape, eps, op):
    """Apply a last-dimension normaliser `core` over the trailing `normalized_shape` dimensions."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    if x.shape[x.ndim - len(normalized_shape):] != normalized_shape:
        raise ShapeError(f"{op}: normalized_shape {normalized_shape} does not match the end of input "
                         f"shape {x.shape}")
    src = _float32(x, op)
    if len(normalized_shape) == 1:
        return core.apply(src, eps)
    flat = mv.reshape(src, x.shape[:x.ndim - len(normalized_shape)] + (-1,))
    return mv.reshape(core.apply(flat, eps), x.shape)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
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


class RMSNormBack(Function):
    """GGML's rms_norm_back(dy, x, eps): the gradient of rms_norm at x (gradient first)."""
    primitive = True

    @staticmethod
    def forward(ctx, g, x, eps):
        step = step_of(g, x)
        node = ops.rms_norm_back(step.context(), contiguous(step, g), contiguous(step, x), float(eps))
        return like(step, node, x)


def rms_norm(x, normalized_shape, weight=None, eps=1e-6):
    y = _normalize_trailing(RMSNormCore, x, normalized_shape, 1e-6 if eps is None else eps, "rms_norm")
    y = y if weight is None else y * weight
    return y if x.dtype is f32 else y.to(x.dtype)


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
class Im2Col(Function):
    """Unfold input patches (GGML im2col): (N, C, H, W) -> (N, OH, OW, C*KH*KW); backward im2col_back."""
    primitive = True

    @staticmethod
    def forward(ctx, x, kernel_shape, stride, padding, dilation, is_2d):
        step = step_of(x)
        ctx.args = (x.shape, kernel_shape, stride, padding, dilation, is_2d)
        kernel = step.context().new_tensor(f32, ne_of(kernel_shape))  # only its shape is read
        s, p, d = stride, padding, dilation
        node = ops.im2col(step.context(), kernel, contiguous(step, x), s[1], s[0], p[1], p[0], d[1], d[0],
                          is_2d, f32)
        ne = node.ne
        shape = tuple(reversed(ne[:4])) if is_2d else (ne[2], ne[1], ne[0])
        ctx.out_ne = ne
        return emit(step, node, shape, f32, x.device)

    @staticmethod
    def backward(ctx, g):
        in_shape, kernel_shape, s, p, d, is_2d = ctx.args
        step = step_of(g)
        kernel = step.context().new_tensor(f32, ne_of(kernel_shape))
        node = ops.im2col_back(step.context(), contiguous(step, g), kernel, ne_of(in_shape),
                               s[1], s[0], p[1], p[0], d[1], d[0], is_2d)
        return emit(step, node, in_shape, f32, g.device), None, None, None, None, None


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
    cols = Im2Col.apply(_float32(x, "conv2d"), weight.shape, s, p, d, True)   # (N, OH, OW, C*KH*KW)
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
    cols = Im2Col.apply(_float32(x, "conv1d"), weight.shape, s, p, d, False)  # (N, OL, C*K)
    ol = cols.shape[1]
    out = matmul_nt(mv.reshape(cols, n * ol, cols.shape[2]), mv.reshape(weight, o, -1))
    out = mv.reshape(mv.contiguous(mv.permute(mv.reshape(out, n, ol, o), 0, 2, 1)), n, o, ol)
    if bias is not None:
        out = out + mv.reshape(bias, 1, o, 1)
    return out


class Pool2d(Function):
    """GGML pool_2d (max or avg) over (N, C, H, W); backward pool_2d_back."""
    primitive = True

    @staticmethod
    def forward(ctx, x, op, kernel, stride, padding):
        step = step_of(x)
        ctx.args = (op, kernel, stride, padding)
        ctx.save_for_backward(x)
        k, s, p = kernel, stride, padding
        node = ops.pool_2d(step.context(), contiguous(step, x), op, k[1], k[0], s[1], s[0], float(p[1]), float(p[0]))
        ne = node.ne
        return emit(step, node, (ne[3], ne[2], ne[1], ne[0]), f32, x.device)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        op, k, s, p = ctx.args
        step = step_of(g, x)
        node = ops.pool_2d_back(step.context(), contiguous(step, g), arg(step, x), op, k[1], k[0], s[1], s[0],
                                float(p[1]), float(p[0]))
        return like(step, node, x), None, None, None, None


def _pool(x, op, kernel_size, stride, padding):
    if x.ndim != 4:
        raise ShapeError(f"{op}_pool2d: expected 4-D input (N, C, H, W), got {x.shape}")
    k = _pair(kernel_size, 2, "kernel_size")
    s = k if stride is None else _pair(stride, 2, "stride")
    p = _pair(padding, 2, "padding")
    if any(pi * 2 > ki for pi, ki in zip(p, k)):
        raise ValueError(f"{op}_pool2d: padding {p} should be at most half of kernel size {k}")
    return Pool2d.apply(_float32(x, f"{op}_pool2d"), op, k, s, p)


def max_pool2d(x, kernel_size, stride=None, padding=0):
    return _pool(x, "max", kernel_size, stride, padding)


def avg_pool2d(x, kernel_size, stride=None, padding=0):
    return _pool(x, "avg", kernel_size, stride, padding)
