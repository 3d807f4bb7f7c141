"""Flash attention: softmax(q k^T * scale + mask) v by ggrad's kernels (ggml/kernels.flash_attn and its
backward; CUDA twins in ggml/cuda/flash_attn.cu), with no (..., L, S) tensor forward or backward.

The forward keeps O and each row's logsumexp L; the backward is one node that recomputes the
probabilities block by block from them and gives dq, dk and dv. Taken where the lowering says so
(`Lowering.attention`, `by_kernel`): scaled_dot_product_attention and MultiheadAttention's paths without
weights returned or dropout (nn/functional.py, nn/attention.py, ops/attention.py's SelfAttention).
"""

import numpy as np

from ...ggml import bf16, f16, f32, kernels
from .. import grad_mode
from ..factory import tensor
from ..function import Function
from ..grad_api import composite_vjp
from ..lowering import choice, names
from ..memory import pending_graph
from ..pending import contiguous_node
from ..primitive import Primitive
from .products import MatMulNT
from .neural import SoftmaxExt


@choice("attention")
def by_kernel(graph, dtype):
    """Whether attention on operands of `dtype` runs on ggrad's kernels where `graph` builds (else GGML's
    ops, the scores materialised)."""
    return False


@by_kernel.alternative("kernel")
def _every_dtype(graph, dtype):
    return True


@by_kernel.alternative("half_kernel")
def _half_dtypes(graph, dtype):
    return dtype is f16 or dtype is bf16


# whether the kernels take attention of some dtype where a graph builds (before autocast picks it)
may_take = names("attention", "kernel", "half_kernel")


def takes(device, dtype):
    """by_kernel for the graph `device`'s ops build in now."""
    return by_kernel(pending_graph(device), dtype)


def rows_node(graph, g):
    """Node g as the kernels read it: itself where its rows are contiguous, else a contiguous copy."""
    return g if g.nb[0] == g.dtype.type_size else contiguous_node(graph.ctx, g)


def mask_fits(mask_shape, heads, batch):
    """Whether an additive mask of numpy shape (1 or batch, 1 or heads, >= L, S) is one the kernels take."""
    return len(mask_shape) == 4 and mask_shape[0] in (1, batch) and mask_shape[1] in (1, heads)


class FlashAttentionForward(Primitive):
    """(O, L) of q (B, H, L, E), k (B, Hk, S, E), v (B, Hk, S, Ev) (H a multiple of Hk), an optional additive
    f32 mask (1|B, 1|H, L, S), the scale and causality: O (B, H, L, Ev) and L (B, H, L), float32."""
    multiple_results = True
    views = True

    @staticmethod
    def build(ctx, graph, q, k, v, mask, scale, causal):
        q, k, v = (rows_node(graph, t) for t in (q, k, v))
        mask = None if mask is None else rows_node(graph, mask)
        return kernels.flash_attn(graph.ctx, q, k, v, mask, scale, causal)

    @staticmethod
    def shape(q, k, v, mask, scale, causal):
        return q.shape[:-1] + v.shape[-1:], q.shape[:-1]

    @staticmethod
    def result_dtype(q, k, v, mask, scale, causal):
        return f32, f32


class FlashAttentionBack(Primitive):
    """dq, dk and dv (float32) of FlashAttentionForward's O given g, from its O and L: one node."""
    multiple_results = True
    views = True

    @staticmethod
    def build(ctx, graph, q, k, v, o, g, lse, mask, scale, causal):
        q, k, v, o, g, lse = (rows_node(graph, t) for t in (q, k, v, o, g, lse))
        mask = None if mask is None else rows_node(graph, mask)
        return kernels.flash_attn_back(graph.ctx, q, k, v, o, g, lse, mask, scale, causal)

    @staticmethod
    def shape(q, k, v, o, g, lse, mask, scale, causal):
        return q.shape, k.shape, v.shape

    @staticmethod
    def result_dtype(q, k, v, o, g, lse, mask, scale, causal):
        return f32, f32, f32


class FlashAttention(Function):
    """softmax(q k^T * scale + mask) v as FlashAttentionForward's O (float32); gradients to q, k and v in their
    dtypes (the mask is a constant)."""
    _replayable = True

    @staticmethod
    def forward(ctx, q, k, v, mask, scale, causal):
        o, lse = FlashAttentionForward.apply(q, k, v, mask, scale, causal)
        ctx.save_for_backward(q, k, v, mask, o, lse)
        ctx.scale, ctx.causal = scale, causal
        return o

    @staticmethod
    def backward(ctx, g):
        q, k, v, mask, o, lse = ctx.saved_tensors
        needs = ctx.needs_input_grad[:3]
        if grad_mode.is_grad_enabled():   # create_graph: the composed formula's differentiable ops
            grads = composite_vjp(lambda q, k, v: _composed(q, k, v, mask, ctx.scale, ctx.causal), (q, k, v),
                                  needs, g)
        else:
            grads = FlashAttentionBack.apply(q, k, v, o, g, lse, mask, ctx.scale, ctx.causal)
        return tuple(None if not need else d if d.dtype is t.dtype else d.to(t.dtype)
                     for d, t, need in zip(grads, (q, k, v), needs)) + (None, None, None)


def _composed(q, k, v, mask, scale, causal):
    """FlashAttention's value in differentiable ops (its second derivatives): the scores materialised."""
    if causal:
        rows, cols = q.shape[-2], k.shape[-2]
        blocked = np.triu(np.full((rows, cols), -np.inf, np.float32), 1)
        causal_mask = tensor(blocked, device=q.device)
        mask = causal_mask if mask is None else mask + causal_mask
    p = SoftmaxExt.apply(MatMulNT.apply(q, k), mask, scale, 0.0)
    return MatMulNT.apply(p, v, False, True)
