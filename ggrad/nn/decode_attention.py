"""Attention of a cached decode step by ggrad's flash attention kernel or GGML's fused `flash_attn_ext`, where
the device's lowering chooses it.

A decode step attends one query a row over a static cache of `max_len` positions, most of them masked. The
composed path (two batched products, the masked softmax, the heads' merge copy) computes every position;
ggrad's kernel (kernels.flash_attn: a path for few query rows, csrc/flash_attn_rows_width.h) and the CPU's
flash_attn_ext skip the keys the mask blocks and write one query's result already in the (B, T, E) layout;
the kernel reads the f32 mask as it is, flash_attn_ext a float16 copy. Neither has a backward here: they serve
steps recorded without gradients (generation), others take the composed path. Which path a backend takes is
its Lowering's `decode_attention` (autograd/lowering.py, measured in benchmarks/README.md).
"""

import weakref

from ..autograd import grad_mode
from ..autograd.lowering import choice, names
from ..autograd.memory import pending_graph
from ..autograd.ops.flash_attention import FlashAttentionForward
from ..autograd.primitive import Primitive
from ..ggml import f16, f32, kernels, ops


class FlashAttention(Primitive):
    """softmax(q k^T * scale + mask) v for q (B, H, T, Dh), k and v (B, H, S, Dh) and an additive f32 or f16
    mask (B | 1, 1, T, S) or (T, S), as (B, T, H * Dh); forward only (an f16 mask is used as it is:
    `half_mask`)."""
    views = True   # q is a view of the fused projection's heads (its rows contiguous, as GGML asks)

    @staticmethod
    def build(ctx, graph, q, k, v, mask, scale):
        c = graph.ctx
        half = mask if mask.is_contiguous else ops.cont(c, mask)
        half = half if half.dtype is f16 else ops.cast(c, half, f16)
        out = ops.flash_attn_ext(c, q, k, v, half, scale, 0.0, 0.0)   # [Dh, H, T, B]
        return ops.reshape_3d(c, out, out.ne[0] * out.ne[1], out.ne[2], out.ne[3])

    @staticmethod
    def shape(q, k, v, mask, scale):
        b, h, t, _ = q.shape
        return (b, t, h * v.shape[-1])


def attend_cached(q, k, v, filled, scale):
    """softmax(q k^T * scale + filled) v as (B, T, H * Dh) by FlashAttention where the device's lowering
    chooses it and it applies (`_applies`), else None (the caller composes the path). `filled` is the cache's
    key mask alone, (B | 1, 1, T | 1, S)."""
    return _by_lowering(pending_graph(q.device), q, k, v, filled, scale)


@choice("decode_attention")
def _by_lowering(graph, q, k, v, filled, scale):
    return None


def fused_on(device):
    """Whether `device`'s lowering attends a cached step by a fused op (attend_cached may return a result,
    where the operands fit), so that a caller prepares the composed path's operands only where it is not."""
    return _fused(pending_graph(device))


_fused = names("decode_attention", "kernel", "flash_attn_ext")


def _applies(q, k, v, filled, scale):
    """No gradient is recorded, float32 queries and mask."""
    return (q.dtype is f32 and filled.dtype is f32
            and not (grad_mode.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)))


@_by_lowering.alternative("flash_attn_ext", fits=_applies)
def _by_flash_attn_ext(graph, q, k, v, filled, scale):
    mask = half_mask(filled)
    t, s = q.shape[2], k.shape[2]
    if mask.shape[-2] != t:   # a non-causal cache's one row for every query
        mask = mask.expand(tuple(mask.shape[:-2]) + (t, s))
    return FlashAttention.apply(q, k, v, mask, scale)


@_by_lowering.alternative("kernel", fits=_applies)
def _by_kernel(graph, q, k, v, filled, scale):
    """ggrad's kernel where each head has one query, keys and values are of one type and the heads at most
    kernels.ATTENTION_HEAD_MAX wide, else flash_attn_ext. Over a float16 or bfloat16 cache the queries are
    rounded to its type first (the kernel's operands share one; flash_attn_ext rounds them so too)."""
    b, h, t, _ = q.shape
    dv = v.shape[-1]
    if t != 1 or k.dtype is not v.dtype or max(q.shape[-1], dv) > kernels.ATTENTION_HEAD_MAX:
        return _by_flash_attn_ext(graph, q, k, v, filled, scale)
    q = q if k.dtype is f32 else q.to(k.dtype)
    out, _ = FlashAttentionForward.apply(q, k, v, filled, scale, False)   # (B, H, 1, Dv): (B, 1, H * Dv)'s memory
    return out.reshape(b, 1, h * dv)


_half_masks = {}   # id(mask) -> (weak reference to mask, its float16 copy)


def half_mask(mask):
    """The f32 `mask` as float16, the type flash_attn_ext reads, converted once per pending graph: every
    layer of a decode step reads the one key mask its cache was fed (one conversion node instead of one a
    layer)."""
    key = id(mask)
    hit = _half_masks.get(key)
    if hit is not None and hit[0]() is mask and hit[1]._pending is not None:
        if hit[1]._pending is pending_graph(mask.device):
            return hit[1]
    half = mask.to(f16)
    _half_masks[key] = (weakref.ref(mask, lambda _, key=key: _half_masks.pop(key, None)), half)
    return half
