"""Normalizations, softmax (mask, scale, ALiBi), RoPE, attention, losses and generators against numpy."""

import math

import numpy as np
import pytest

from ggrad.ggml import ops

R = np.random.default_rng(3)
X = R.standard_normal((2, 3, 8)).astype(np.float32)


def test_norms(check):
    eps = 1e-5
    check(lambda ctx, a: (ops.norm(ctx, a, eps), ops.rms_norm(ctx, a, eps), ops.l2_norm(ctx, a, eps),
                          ops.norm_inplace(ctx, ops.dup(ctx, a), eps), ops.rms_norm_inplace(ctx, ops.dup(ctx, a), eps),
                          ops.l2_norm_inplace(ctx, ops.dup(ctx, a), eps)),
          [X], lambda x: ((x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps),
                          x / np.sqrt((x * x).mean(-1, keepdims=True) + eps),
                          x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), eps)) * 2, atol=1e-5)


def test_group_norm(check):
    x = R.standard_normal((2, 4, 3, 5)).astype(np.float32)     # [N, C, H, W]

    def ref(x, groups=2, eps=1e-6):
        n, c = x.shape[:2]
        g = x.reshape(n, groups, -1)
        out = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)
        return out.reshape(x.shape)

    check(lambda ctx, a: (ops.group_norm(ctx, a, 2, 1e-6), ops.group_norm_inplace(ctx, ops.dup(ctx, a), 2, 1e-6)),
          [x], lambda x: (ref(x), ref(x)), atol=1e-5)


def test_soft_max(check, refs):
    check(lambda ctx, a: (ops.soft_max(ctx, a), ops.soft_max_inplace(ctx, ops.dup(ctx, a))), [X],
          lambda x: (refs.softmax(x), refs.softmax(x)), atol=1e-6)


def alibi_slopes(n_head, max_bias):
    n_log2 = 2 ** math.floor(math.log2(n_head))
    m0 = 2 ** (-max_bias / n_log2)
    m1 = 2 ** (-(max_bias / 2) / n_log2)
    return np.array([m0 ** (h + 1) if h < n_log2 else m1 ** (2 * (h - n_log2) + 1) for h in range(n_head)],
                    np.float32)


@pytest.mark.parametrize("mask_dtype", ["f32", "f16"])
def test_soft_max_ext(check, mask_dtype, refs):
    n_head, n_q, n_kv = 3, 4, 6
    s = R.standard_normal((n_head, n_q, n_kv)).astype(np.float32)
    mask = np.where(np.arange(n_kv)[None, :] > np.arange(n_q)[:, None] + 2, -np.inf, 0).astype(np.float32)
    mask = np.concatenate([mask, np.zeros((1, n_kv), np.float32)])        # mask.ne[1] >= a.ne[1] is allowed
    mask[:, 0] = 0.25                                                         # a non-trivial additive term
    if mask_dtype == "f16":
        mask = mask.astype(np.float16)
    scale = 0.7
    check(lambda ctx, a, m: ops.soft_max_ext(ctx, a, m, scale, 0.0), [s, (mask, mask_dtype)],
          lambda a, m: refs.softmax(a * scale + m[:n_q].astype(np.float32)), atol=1e-3 if mask_dtype == "f16" else 1e-6)
    slopes = alibi_slopes(n_head, 8.0)
    check(lambda ctx, a, m: (ops.soft_max_ext(ctx, a, m, scale, 8.0),
                             ops.soft_max_ext_inplace(ctx, ops.dup(ctx, a), m, scale, 8.0)),
          [s, (mask, mask_dtype)],
          lambda a, m: (refs.softmax(a * scale + slopes[:, None, None] * m[:n_q].astype(np.float32)),) * 2, atol=1e-3)
    check(lambda ctx, a: ops.soft_max_ext(ctx, a, None, scale, 0.0), [s], lambda a: refs.softmax(a * scale), atol=1e-6)


@pytest.mark.parametrize("mode", ["normal", "neox"])
def test_rope(check, mode, refs):
    x = R.standard_normal((5, 2, 8)).astype(np.float32)       # [n_tokens, n_head, head_dim]
    pos = np.array([0, 1, 2, 7, 30], np.int32)
    neox = mode == "neox"
    ext = (0, 10000.0, 1.0, 0.0, 1.0, 0.0, 0.0)
    check(lambda ctx, a, p: (ops.rope_ext(ctx, a, p, None, 6, mode, *ext), ops.rope(ctx, a, p, 8, mode),
                             ops.rope_ext_inplace(ctx, ops.dup(ctx, a), p, None, 8, mode, *ext),
                             ops.rope_inplace(ctx, ops.dup(ctx, a), p, 8, mode),
                             ops.rope_custom(ctx, a, p, 8, mode, *ext),
                             ops.rope_custom_inplace(ctx, ops.dup(ctx, a), p, 8, mode, *ext)),
          [x, pos], lambda a, p: (refs.rope_ref(a, p, 6, neox),) + (refs.rope_ref(a, p, 8, neox),) * 5, atol=1e-4)


def test_rope_freq_factors(check):
    x = R.standard_normal((3, 2, 8)).astype(np.float32)
    pos = np.array([1, 4, 9], np.int32)
    ff = np.array([1.0, 2.0, 4.0, 8.0], np.float32)

    def ref(a, p, f):
        out = a.copy()
        for t, pp in enumerate(p):
            for i in range(4):
                theta = pp * 10000.0 ** (-2 * i / 8) / f[i]
                c, s = math.cos(theta), math.sin(theta)
                x0, x1 = a[t, :, 2 * i], a[t, :, 2 * i + 1]
                out[t, :, 2 * i], out[t, :, 2 * i + 1] = x0 * c - x1 * s, x0 * s + x1 * c
        return out

    check(lambda ctx, a, p, f: ops.rope_ext(ctx, a, p, f, 8, "normal", 0, 10000.0, 1.0, 0.0, 1.0, 0.0, 0.0),
          [x, pos, ff], ref, atol=1e-4)


def test_rope_multi_builds(ctx):
    a = ctx.new_tensor("f32", (16, 2, 3))
    pos = ctx.new_tensor("i32", (12,))
    for mode, sections in (("mrope", [4, 2, 2, 0]), ("imrope", [4, 2, 2, 0]), ("vision", [4, 4, 0, 0])):
        n_dims = 8 if mode == "vision" else 16
        t = ops.rope_multi(ctx, a, pos, None, n_dims, sections, mode, 0, 10000.0, 1.0, 0.0, 1.0, 0.0, 0.0)
        u = ops.rope_multi_inplace(ctx, a, pos, None, n_dims, sections, mode, 0, 10000.0, 1.0, 0.0, 1.0, 0.0, 0.0)
        assert t.ne == a.ne == u.ne and t.op == "ROPE"


@pytest.mark.parametrize("kv_type", ["f16", "f32"])
def test_flash_attn_ext(check, kv_type, refs):
    D, n_q, n_kv, n_head, n_head_kv = 8, 3, 5, 4, 2
    q = R.standard_normal((1, n_head, n_q, D)).astype(np.float32)
    k = R.standard_normal((1, n_head_kv, n_kv, D)).astype(np.float32)
    v = R.standard_normal((1, n_head_kv, n_kv, D)).astype(np.float32)
    mask = np.where(np.arange(n_kv)[None, :] > np.arange(n_q)[:, None] + 2, -np.inf, 0).astype(np.float16)
    scale = 1 / math.sqrt(D)

    def ref(q, k, v, m):
        out = np.zeros((1, n_q, n_head, D), np.float32)
        for h in range(n_head):
            g = h // (n_head // n_head_kv)
            p = refs.softmax(q[0, h] @ k[0, g].T * scale + m.astype(np.float32))
            out[0, :, h] = p @ v[0, g]
        return out

    tol = 2e-2 if kv_type == "f16" else 1e-4
    check(lambda ctx, q_, k_, v_, m_: ops.flash_attn_ext(ctx, q_, k_, v_, m_, scale, 0.0, 0.0),
          [q, (k, kv_type), (v, kv_type), (mask, "f16")], ref, atol=tol, rtol=tol)


def test_cross_entropy_loss(check, refs):
    logits = R.standard_normal((4, 6)).astype(np.float32)
    labels = refs.softmax(R.standard_normal((4, 6)).astype(np.float32))
    check(lambda ctx, a, b: ops.cross_entropy_loss(ctx, a, b), [logits, labels],
          lambda a, b: np.array([-(b * np.log(refs.softmax(a))).sum() / a.shape[0]]), atol=1e-5)


def test_timestep_embedding_arange(check):
    t = np.array([0.0, 1.0, 10.0, 500.0], np.float32)

    def ref(t, dim=6, max_period=10000):
        half = dim // 2
        freqs = np.exp(-math.log(max_period) * np.arange(half) / half)
        args = t[:, None] * freqs[None]
        return np.concatenate([np.cos(args), np.sin(args)], -1)

    check(lambda ctx, a: ops.timestep_embedding(ctx, a, 6, 10000), [t], ref, atol=1e-4)
    check(lambda ctx: ops.arange(ctx, 0.0, 5.0, 0.5), [], lambda: np.arange(0, 5, 0.5))
    check(lambda ctx: ops.arange(ctx, -2.0, 1.0, 1.0), [], lambda: np.arange(-2, 1, 1.0))
