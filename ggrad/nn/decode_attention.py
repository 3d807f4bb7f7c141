"""Attention of a cached decode step by GGML's fused `flash_attn_ext`, where the device's lowering chooses it.

A decode step attends one query a row over a static cache of `max_len` positions, most of them masked. The
composed path (two batched products, the masked softmax, the heads' merge copy) computes every position; the
CPU's flash_attn_ext skips the keys whose mask is -inf and writes its result already in the (B, T, E) layout.
It has no backward: it serves steps recorded without gradients (generation), others take the composed path.
Which path a backend takes is its Lowering's `decode_attention` (autograd/lowering.py, measured in
benchmarks/README.md).
"""

from ..autograd import grad_mode
from ..autograd.memory import lowering_of
from ..autograd.primitive import Primitive
from ..ggml import f16, f32, ops


class FlashAttention(Primitive):
    """softmax(q k^T * scale + mask) v for q (B, H, T, Dh), k and v (B, H, S, Dh) and an additive f32 mask
    (B | 1, 1, T, S) or (T, S), as (B, T, H * Dh); forward only."""
    views = True   # q is a view of the fused projection's heads (its rows contiguous, as GGML asks)

    @staticmethod
    def build(ctx, graph, q, k, v, mask, scale):
        c = graph.ctx
        half_mask = ops.cast(c, mask if mask.is_contiguous else ops.cont(c, mask), f16)
        out = ops.flash_attn_ext(c, q, k, v, half_mask, scale, 0.0, 0.0)   # [Dh, H, T, B]
        return ops.reshape_3d(c, out, out.ne[0] * out.ne[1], out.ne[2], out.ne[3])

    @staticmethod
    def shape(q, k, v, mask, scale):
        b, h, t, _ = q.shape
        return (b, t, h * v.shape[-1])


def flash_decode_applies(q, k, v, mask):
    """Whether a cached step's attention goes through FlashAttention: the device's lowering chooses it, no
    gradient is recorded, float32 queries, and the mask is the cache's key mask alone."""
    return (mask is not None and q.dtype is f32 and mask.dtype is f32
            and not (grad_mode.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad))
            and lowering_of(q.device).decode_attention == "flash_attn_ext")
