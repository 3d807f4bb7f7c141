"""Matrix products on GGML's `mul_mat` (rows of a dotted with rows of b) with batch broadcasting.

`x @ w.T` is GGML's native form (`mul_mat(w, x)`), so `linear` and `q @ k.T` need no transpose
copy; a general `a @ b` copies `b` transposed. Both gradients are `mul_mat`s of transposed copies:
on the CPU backend that is about twice as fast as `out_prod` for the weight gradient (784x512 from
a batch of 128: 0.8-1.8 ms vs 1.6-2.2 ms, with and without llamafile), and CUDA has no f16 out_prod.
"""

from ...ggml import f32, ops
from ...ggml.errors import DTypeError, ShapeError
from ..function import Function
from ..nodes import contiguous, emit, step_of
from . import elementwise as ew
from . import movement as mv
from . import quant
from ..tensor import Tensor


class MatMulNT(Function):
    """y = x @ w^T for x (..., M, K) and w (..., N, K); w's batch dims broadcast into x's."""
    primitive = True

    @staticmethod
    def forward(ctx, x, w):
        step = step_of(x, w)
        ctx.save_for_backward(x, w)
        batch = x.shape[:-2]
        node = ops.mul_mat(step.context(), contiguous(step, w), contiguous(step, x))
        return emit(step, node, batch + (x.shape[-2], w.shape[-2]), f32, x.device)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = gw = None
        if ctx.needs_input_grad[0]:
            # dx = g @ w: rows of g against rows of w^T
            wt = mv.transpose(w, -1, -2)
            step = step_of(g, wt)
            node = ops.mul_mat(step.context(), contiguous(step, wt), contiguous(step, g))
            gx = emit(step, node, x.shape, f32, g.device)
        if ctx.needs_input_grad[1]:
            # dw = g^T @ x: rows of g^T against rows of x^T, summed over x's extra batch dims
            xt, gt = mv.transpose(x, -1, -2), mv.transpose(g, -1, -2)
            step = step_of(xt, gt)
            node = ops.mul_mat(step.context(), contiguous(step, xt), contiguous(step, gt))
            full = emit(step, node, g.shape[:-2] + (g.shape[-1], x.shape[-1]), f32, g.device)
            gw = ew.reduce_to(full, w.shape)
        return gx, gw


def _as_compute(t, op):
    if not t.dtype.is_float:
        raise DTypeError(f"{op}: expected floating point tensors, got {t.dtype.name}")
    return t


def matmul_nt(x, w):
    """x @ w.T with numpy broadcasting of the batch dimensions."""
    if w.dtype.is_quantized:
        return quant.matmul_nt_quantized(x, w)
    _as_compute(x, "matmul")
    _as_compute(w, "matmul")
    if x.ndim < 2 or w.ndim < 2:
        raise ShapeError(f"matmul: expected at least 2-D operands, got {x.shape} and {w.shape}")
    if x.shape[-1] != w.shape[-1]:
        raise ShapeError(f"matmul: shapes {x.shape} and {tuple(w.shape[:-2]) + (w.shape[-1], w.shape[-2])} "
                         f"don't match (inner dims {x.shape[-1]} != {w.shape[-1]})")
    batch = ew.broadcast_shapes(x.shape[:-2], w.shape[:-2], "matmul")
    if x.shape[:-2] != batch:
        x = mv.expand(x, batch + x.shape[-2:])
    if x.dtype is not f32:
        x = x.to(f32)
    if w.dtype.name not in ("f32", "f16"):
        w = w.to(f32)
    return MatMulNT.apply(x, w)


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
    out = matmul_nt(a, mv.transpose(b, -1, -2))
    for d in squeeze:
        out = mv.squeeze(out, d)
    return out


def linear(x, weight, bias=None):
    """x @ weight.T + bias, weight of shape (out_features, in_features)."""
    if x.shape[-1:] != weight.shape[-1:]:
        raise ShapeError(f"linear: input of shape {x.shape} does not match weight of shape {weight.shape} "
                         f"(in_features {weight.shape[-1]})")
    lead = x.shape[:-1]
    flat = x if x.ndim == 2 else mv.reshape(x, -1, x.shape[-1])
    out = matmul_nt(flat, weight)
    if bias is not None:
        out = out + bias
    return out if x.ndim == 2 else mv.reshape(out, lead + (weight.shape[0],))
