"""Matrix products on GGML's `mul_mat` (rows of a dotted with rows of b) with batch broadcasting.

`x @ w.T` is GGML's native form (`mul_mat(w, x)`), so `linear` and `q @ k.T` need no transpose
copy; a general `a @ b` reads `b` transposed. Both gradients are products of transposed operands. On
the CPU, f32 products run on ggrad's own kernel (lowering.matmul), which reads those in place; with
GGML's mul_mat they are copies, which on the CPU is still about twice as fast as `out_prod` for the
weight gradient (784x512 from a batch of 128: 0.8-1.8 ms vs 1.6-2.2 ms), and CUDA has no f16 out_prod.
"""

from ...ggml import f32, kernels, ops
from ...ggml.errors import ShapeError
from .. import lowering
from ..autocast_hook import autocast_op
from ..dtype_rules import require_float
from ..primitive import Primitive
from ..tensor import Tensor
from .broadcast import broadcast_shapes, reduce_to
from . import quant
from ..pending import contiguous_node
from . import views as mv


class MatMulNT(Primitive):
    """y = x @ w^T for x (..., M, K) and w (..., N, K); w's batch dims broadcast into x's.

    Operands come with their strides: where the backend's mul_mat reads strided rows (lowering.py) a
    view whose rows are contiguous (attention heads of a fused projection, a double transpose) is read in
    place; other views are copied."""
    saves = "inputs"
    views = True

    @staticmethod
    def build(ctx, graph, x, w):
        lowered = graph.lowering
        if lowered.matmul == "kernel" and x.dtype is f32 and w.dtype is f32:
            return kernels.matmul_f32(graph.ctx, w, x)   # any strides: no copies
        strided = lowered.strided_matmul
        return ops.mul_mat(graph.ctx, _rows(graph, w, strided in ("both", "first"), True),
                           _rows(graph, x, strided == "both", False))

    @staticmethod
    def shape(x, w):
        return x.shape[:-1] + (w.shape[-2],)

    @staticmethod
    def result_dtype(x, w):
        return f32

    @classmethod
    def saved(cls, ctx, args, out):
        """Only what a wanted gradient reads, as PyTorch's mm: w for dx, x for dw."""
        x, w = args
        return (x if ctx.needs_input_grad[1] else None, w if ctx.needs_input_grad[0] else None)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = gw = None
        if ctx.needs_input_grad[0]:
            # dx = g @ w: rows of g against rows of w^T
            gx = MatMulNT.apply(g, mv.transpose(w, -1, -2))
        if ctx.needs_input_grad[1]:
            gw = reduce_to(weight_grad(g, x), ctx.shapes[1])
        return gx, gw


def _rows(graph, g, strided, first):
    """`g` as mul_mat reads it: itself when packed, or (`strided`) a view with contiguous rows that is
    not transposed (GGML asserts that of its first operand); else a contiguous copy."""
    if g.is_packed:
        return g
    nb = g.nb
    if strided and nb[0] == g.dtype.type_size and not (first and nb[0] > nb[1]):
        return g
    return contiguous_node(graph.ctx, g, graph.lowering.transpose_copy == "concat")


class OutProd(Primitive):
    """y = g^T @ x for x (..., N, K) and g (..., N, M): GGML out_prod, with no transposed copies."""
    saves = "inputs"

    @staticmethod
    def build(ctx, graph, x, g):
        return ops.out_prod(graph.ctx, x, g)

    @staticmethod
    def shape(x, g):
        return g.shape[:-2] + (g.shape[-1], x.shape[-1])

    @staticmethod
    def backward(ctx, gy):
        x, g = ctx.saved_tensors
        need_x, need_g = ctx.needs_input_grad
        return (MatMulNT.apply(g, mv.transpose(gy, -1, -2)) if need_x else None,   # g @ gy
                MatMulNT.apply(x, gy) if need_g else None)                         # x @ gy^T


def weight_grad(g, x):
    """dw = g^T @ x, the gradient of x @ w^T with respect to w (before summing x's extra batch dims).

    out_prod where the backend runs it fast on f32 (lowering.py), else rows of g^T against rows of x^T.
    """
    if lowering.for_device(g.device).weight_grad == "out_prod" and x.dtype is f32 and g.dtype is f32:
        return OutProd.apply(x, g)
    return MatMulNT.apply(mv.transpose(g, -1, -2), mv.transpose(x, -1, -2))


def matmul_nt(x, w, bias=None):
    """x @ w.T (+ bias) with numpy broadcasting of the batch dimensions."""
    if w.dtype.is_quantized:
        out = quant.matmul_nt_quantized(x, w)
        return out if bias is None else out + bias
    require_float(x, "matmul")
    require_float(w, "matmul")
    if x.ndim < 2 or w.ndim < 2:
        raise ShapeError(f"matmul: expected at least 2-D operands, got {x.shape} and {w.shape}")
    if x.shape[-1] != w.shape[-1]:
        raise ShapeError(f"matmul: shapes {x.shape} and {tuple(w.shape[:-2]) + (w.shape[-1], w.shape[-2])} "
                         f"don't match (inner dims {x.shape[-1]} != {w.shape[-1]})")
    batch = broadcast_shapes(x.shape[:-2], w.shape[:-2], "matmul")
    if x.shape[:-2] != batch:
        x = mv.expand(x, batch + x.shape[-2:])
    if x.dtype is w.dtype and x.dtype.name in ("f16", "bf16"):
        # GGML takes b in a's dot-product type and gives f32: a bias joins before the one rounding
        out = MatMulNT.apply(x, w)
        return (out if bias is None else out + bias.to(f32)).to(x.dtype)
    if x.dtype is not f32:
        x = x.to(f32)
    if w.dtype.name not in ("f32", "f16"):
        w = w.to(f32)
    out = MatMulNT.apply(x, w)
    return out if bias is None else out + bias


@autocast_op("matmul")
def matmul(a, b):
    """a @ b with PyTorch's rules for 1-D operands and broadcast batch dimensions."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"matmul: expected Tensors, got {type(a).__name__} and {type(b).__name__}")
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: both arguments need at least 1 dimension, got {a.shape} and {b.shape}")
    squeeze = []
    if a.ndim == 1:
        a = mv.unsqueeze(a, 0)
        squeeze.append(-2)
    if b.ndim == 1:
        b = mv.unsqueeze(b, 1)
        squeeze.append(-1)
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"matmul: shapes {a.shape} and {b.shape} don't match "
                         f"(inner dims {a.shape[-1]} != {b.shape[-2]})")
    if a.ndim > 4 or b.ndim > 4:
        batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], "matmul")
        out = mv.folding().matmul(matmul, a, b, batch)
    else:
        out = matmul_nt(a, mv.transpose(b, -1, -2))
    if a.dtype is b.dtype and a.dtype.name in ("f16", "bf16"):
        out = out.to(a.dtype)   # half @ half is half, as PyTorch (GGML accumulates in float32)
    for d in squeeze:
        out = mv.squeeze(out, d)
    return out


@autocast_op("linear")
def linear(x, weight, bias=None):
    """x @ weight.T + bias, weight of shape (out_features, in_features)."""
    if x.shape[-1:] != weight.shape[-1:]:
        raise ShapeError(f"linear: input of shape {x.shape} does not match weight of shape {weight.shape} "
                         f"(in_features {weight.shape[-1]})")
    lead = x.shape[:-1]
    flat = x if x.ndim == 2 else mv.reshape(x, -1, x.shape[-1])
    out = matmul_nt(flat, weight, bias)
    return out if x.ndim == 2 else mv.reshape(out, lead + (weight.shape[0],))
