"""ggrad's flash attention kernels (kernels.flash_attn and flash_attn_back, csrc/flash_attn.c) against PyTorch's
scaled_dot_product_attention and its gradients: f32 to ~1e-5, f16 and bf16 operands against PyTorch computing
in float32 from the same rounded values; causal or not, additive masks with blocked rows, grouped-query
heads, odd lengths and head widths up to 256, strided operands, each instruction set; the same bits at any
thread count; bad operands refused. The token-major layouts (flash_attn's token_major O, flash_attn_back's
joined gradient of a fused qkv) give the head-major results' very bits, moved."""

import numpy as np
import pytest

import ggrad.ggml as gg
from ggrad.ggml import kernels, ops
from ggrad.ggml.errors import ArgumentError, DTypeError, ShapeError

torch = pytest.importorskip("torch")

TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def _inputs(b, h, hk, t, s, d, dv, mask, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape).astype(np.float32)
              for shape in ((b, h, t, d), (b, hk, s, d), (b, hk, s, dv), (b, h, t, dv))]
    if mask:
        m = (rng.standard_normal((b, 1, t, s)) * 2).astype(np.float32)
        m[0, 0, 1, :] = -np.inf   # a row that sees no key: zeros, as PyTorch's
        m[:, :, :, 3::7] = -np.inf
        arrays.append(m)
    return arrays


def _kernel(runner, arrays, dtype, scale, causal, threads=None, q_view=None):
    """(O, L, dq, dk, dv) of the kernels, numpy order."""
    def build(ctx, q, k, v, g, *mask):
        if q_view:
            q = q_view(ctx, q)
        m = mask[0] if mask else None
        o, lse = kernels.flash_attn(ctx, q, k, v, m, scale, causal)
        return (o, lse) + kernels.flash_attn_back(ctx, q, k, v, o, g, lse, m, scale, causal)
    inputs = [(a, dtype) for a in arrays[:3]] + arrays[3:]
    if threads is None:
        got, _ = runner.run(build, inputs)
    else:
        before = gg.threads.policy.fixed
        gg.set_num_threads(threads)
        try:
            got, _ = runner.run(build, inputs)
        finally:
            gg.set_num_threads(before)
    return got


def _torch(arrays, dtype, scale, causal):
    q, k, v = (torch.tensor(a).to(TORCH_DTYPES[dtype]).float().requires_grad_() for a in arrays[:3])
    mask = torch.tensor(arrays[4]) if len(arrays) > 4 else None
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale,
                                                           enable_gqa=q.shape[1] != k.shape[1])
    out.backward(torch.tensor(arrays[3]))
    with torch.no_grad():
        heads = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        scores = q @ heads.transpose(-1, -2) * scale
        if mask is not None:
            scores = scores + mask
        if causal:
            scores = scores + torch.full(scores.shape[-2:], -torch.inf).triu(1)
        lse = torch.logsumexp(scores, -1)
    return [out.detach().numpy(), lse.numpy(), q.grad.numpy(), k.grad.numpy(), v.grad.numpy()]


def _check(got, want, tol):
    for name, g, w in zip(("O", "L", "dq", "dk", "dv"), got, want):
        g = g.reshape(w.shape)
        w = np.nan_to_num(w, nan=0.0, neginf=-1e30)
        g = np.nan_to_num(g, nan=np.inf, neginf=-1e30)
        scale = max(float(np.abs(w[np.abs(w) < 1e29]).max()), 1e-6)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale, err_msg=name)


CASES = {   # b, h, hk, t, s, d, dv, causal, mask
    "odd": (2, 3, 3, 37, 37, 33, 33, False, False),
    "odd_causal": (2, 3, 3, 37, 37, 33, 33, True, False),
    "long_causal": (1, 2, 2, 130, 130, 64, 64, True, False),
    "mask_rect_gqa": (2, 4, 2, 70, 130, 64, 48, False, True),
    "causal_rect": (1, 2, 2, 90, 50, 16, 24, True, False),
    "wide": (1, 2, 1, 65, 65, 128, 128, True, False),
    "widest": (1, 1, 1, 40, 70, 256, 200, False, True),
    "one_query": (2, 2, 2, 1, 70, 8, 8, False, False),
    "few_rows": (2, 4, 2, 5, 70, 7, 9, False, True),   # at most FA_ROWS_MAX queries: the row by row path
    "few_rows_causal": (1, 3, 1, 8, 40, 33, 17, True, False),
    "decode_gqa": (2, 8, 2, 2, 256, 32, 32, False, True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_f32_matches_torch(runner, case):
    *sizes, causal, mask = CASES[case]
    arrays = _inputs(*sizes, mask)
    scale = 0.7 / np.sqrt(sizes[5])
    _check(_kernel(runner, arrays, "f32", scale, causal), _torch(arrays, "f32", scale, causal), 2e-5)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("case", ["odd_causal", "mask_rect_gqa", "wide", "few_rows"])
def test_half_operands_match_torch_on_their_values(runner, dtype, case):
    """Half operands are read exactly and everything sums in f32: PyTorch in f32 on the rounded values."""
    *sizes, causal, mask = CASES[case]
    arrays = _inputs(*sizes, mask)
    scale = 1 / np.sqrt(sizes[5])
    _check(_kernel(runner, arrays, dtype, scale, causal), _torch(arrays, dtype, scale, causal), 2e-5)


@pytest.mark.parametrize("case", ["mask_rect_gqa", "few_rows"])
def test_each_instruction_set_gives_the_result(runner, isa, case):
    *sizes, causal, mask = CASES[case]
    arrays = _inputs(*sizes, mask)
    _check(_kernel(runner, arrays[:4], "f32", 0.125, True), _torch(arrays[:4], "f32", 0.125, True), 2e-5)


def _cache_mask(b, t, s, seed):
    """A static cache's additive mask (b, 1, t, s): runs of keys blocked by -1e30 (nn's MASKED) and by -inf,
    the rest 0 or small values."""
    rng = np.random.default_rng(seed)
    m = (rng.standard_normal((b, 1, t, s)) * 0.5).astype(np.float32)
    m[..., s // 2:] = -1e30                 # the unfilled slots
    m[..., 5:17] = -np.inf
    m[0, 0, 0, 20:40] = -1e30
    return m


@pytest.mark.parametrize("t", [1, 3])
@pytest.mark.parametrize("d", [32, 13])
def test_few_rows_over_a_masked_cache_match_torch_and_the_tiled_path(runner, isa, t, d):
    """A decode step's shapes (grouped-query heads, a mostly masked cache): the row by row path skips the
    masked keys and gives PyTorch's result, and that of the tiled path on the same rows (asked for with more
    rows than FA_ROWS_MAX: rows are independent)."""
    b, h, hk, s = 2, 8, 2, 96
    arrays = _inputs(b, h, hk, 12, s, d, d, False, seed=t)
    arrays.append(_cache_mask(b, 12, s, seed=d))
    few = [arrays[0][:, :, :t], arrays[1], arrays[2], arrays[3][:, :, :t], arrays[4][:, :, :t]]
    scale = 1 / np.sqrt(d)
    got = _kernel(runner, few, "f32", scale, False)
    tiled = _kernel(runner, arrays, "f32", scale, False)
    _check(got, _torch(few, "f32", scale, False), 2e-5)
    np.testing.assert_allclose(got[0].reshape(b, h, t, d), tiled[0].reshape(b, h, 12, d)[:, :, :t], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(got[1].reshape(b, h, t), tiled[1].reshape(b, h, 12)[:, :, :t], rtol=1e-6)


def test_few_rows_whose_keys_are_all_masked(runner):
    """Every key at -inf: zeros and L -inf (as the tiled path); every key at -1e30: the keys count equally
    (PyTorch's softmax of equal scores); the NaN in a skipped key's values never reaches the result."""
    arrays = _inputs(1, 2, 1, 3, 40, 8, 8, False)
    m = np.zeros((1, 1, 3, 40), np.float32)
    m[..., 30:] = -np.inf
    m[0, 0, 0, :] = -np.inf
    m[0, 0, 1, :30] = -1e30
    arrays.append(m)
    want = _torch([a[:, :, 2:] if i in (0, 3, 4) else a for i, a in enumerate(arrays)], "f32", 0.5, False)
    arrays[2][0, 0, 35] = np.nan   # a value only masked keys hold
    o, lse = _kernel(runner, arrays, "f32", 0.5, False)[:2]
    o, lse = o.reshape(1, 2, 3, 8), lse.reshape(1, 2, 3)
    assert np.all(o[0, :, 0] == 0) and np.all(lse[0, :, 0] == -np.inf)
    np.testing.assert_allclose(o[0, :, 1], np.broadcast_to(arrays[2][0, 0, :30].mean(0), (2, 8)), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(o[0, :, 2], want[0][0, :, 0], rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("t", [150, 3])
def test_same_bits_at_any_thread_count(runner, t):
    arrays = _inputs(2, 4, 2, t, 150, 40, 40, True)
    results = [_kernel(runner, arrays, "bf16", 0.2, True, threads) for threads in (1, 2, 3, 7)]
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


def test_strided_query_rows_are_read_in_place(runner):
    """q as the first half of wider rows (a view, as the heads of a fused projection): no copy needed."""
    arrays = _inputs(2, 2, 2, 20, 20, 16, 16, False)
    wide = np.concatenate([arrays[0], np.full_like(arrays[0], np.nan)], -1)

    def first_half(ctx, q):
        return ops.view_4d(ctx, q, 16, q.ne[1], q.ne[2], q.ne[3], q.nb[1], q.nb[2], q.nb[3], 0)
    got = _kernel(runner, [wide] + arrays[1:], "f32", 0.25, False, q_view=first_half)
    _check(got, _torch(arrays, "f32", 0.25, False), 2e-5)


def test_a_row_that_sees_no_key_gives_zeros_and_no_gradient(runner):
    arrays = _inputs(1, 1, 1, 4, 6, 8, 8, True)
    arrays[4][...] = 0.0
    arrays[4][0, 0, 2, :] = -np.inf
    o, lse, dq, dk, dv = _kernel(runner, arrays, "f32", 0.3, False)
    o, dq = o.reshape(1, 1, 4, 8), dq.reshape(1, 1, 4, 8)
    assert np.all(o[0, 0, 2] == 0) and np.all(dq[0, 0, 2] == 0) and lse.reshape(-1)[2] == -np.inf
    assert np.all(np.isfinite(dk)) and np.all(np.isfinite(dv))


def _qkv_inputs(b, h, t, d, mask, seed=0):
    """A fused projection qkv (b, t, 3 h d), the gradient at O (b, t, h d), and the mask (b, 1, t, t)."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal((b, t, 3 * h * d)).astype(np.float32),
              rng.standard_normal((b, t, h * d)).astype(np.float32)]
    if mask:
        m = (rng.standard_normal((b, 1, t, t)) * 2).astype(np.float32)
        m[0, 0, 1, :] = -np.inf
        m[:, :, :, 3::7] = -np.inf
        arrays.append(m)
    return arrays


def _heads(ctx, x, heads, parts, part):
    """Part `part` of the `parts` side by side in x [parts h d, t, b] as heads [d, t, h, b] (a view, as
    SelfAttention takes them)."""
    dh = x.ne[0] // parts // heads
    size = x.nb[0]
    split = ops.view_4d(ctx, x, dh, heads, x.ne[1], x.ne[2], dh * size, x.nb[1], x.nb[2], part * dh * heads * size)
    return ops.permute(ctx, split, 0, 2, 1, 3)


def _both_layouts(runner, arrays, dtype, heads, scale, causal, threads=1):
    """(O, L, dq, dk, dv) head-major and (O, L, d qkv) token-major of one fused qkv, numpy order."""
    def build(ctx, qkv, g, *mask):
        q, k, v = (_heads(ctx, qkv, heads, 3, part) for part in range(3))
        do, m = _heads(ctx, g, heads, 1, 0), mask[0] if mask else None
        o, lse = kernels.flash_attn(ctx, q, k, v, m, scale, causal)
        head_major = (o, lse) + kernels.flash_attn_back(ctx, q, k, v, o, do, lse, m, scale, causal)
        o_t, lse_t = kernels.flash_attn(ctx, q, k, v, m, scale, causal, token_major=True)
        o_heads = ops.permute(ctx, o_t, 0, 2, 1, 3)   # [d, t, h, b], a view
        grad = kernels.flash_attn_back(ctx, q, k, v, o_heads, do, lse_t, m, scale, causal, joined=True)
        return head_major + (o_t, lse_t, grad)
    before = gg.threads.policy.fixed
    gg.set_num_threads(threads)
    try:
        got, outs = runner.run(build, [(arrays[0], dtype)] + arrays[1:])
    finally:
        gg.set_num_threads(before)
    assert list(outs[5].ne) == list(outs[0].ne[i] for i in (0, 2, 1, 3)) and outs[5].is_contiguous
    assert list(outs[7].ne)[:3] == [arrays[0].shape[2], arrays[0].shape[1], arrays[0].shape[0]]
    assert outs[7].is_contiguous
    return got[:5], got[5:]


def _split_qkv(arrays, heads):
    """q, k, v (b, h, t, d), the gradient at O (b, h, t, d) and the mask of _qkv_inputs' arrays."""
    qkv, g = arrays[:2]
    b, t, width = qkv.shape
    d = width // 3 // heads
    q, k, v = qkv.reshape(b, t, 3, heads, d).transpose(2, 0, 3, 1, 4)
    return [q, k, v, g.reshape(b, t, heads, d).transpose(0, 2, 1, 3)] + arrays[2:]


@pytest.mark.parametrize("t", [70, 5])   # 5: the forward's row by row path (at most FA_ROWS_MAX queries)
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype,causal,mask", [("f32", True, False), ("f32", False, True), ("f16", True, False),
                                               ("bf16", False, True), ("bf16", True, True)])
def test_token_major_layouts_hold_the_head_major_bits(runner, dtype, causal, mask, threads, t):
    """O token-major is O head-major permuted, the joined gradient dq, dk, dv side by side token-major (qkv's
    layout), to the bit; and both are PyTorch's gradients at qkv."""
    b, h, d = 2, 3, 24
    arrays = _qkv_inputs(b, h, t, d, mask, seed=threads)
    scale = 1 / np.sqrt(d)
    (o, lse, dq, dk, dv), (o_t, lse_t, grad) = _both_layouts(runner, arrays, dtype, h, scale, causal, threads)
    heads = [x.reshape(b, h, t, d) for x in (o, dq, dk, dv)]
    np.testing.assert_array_equal(o_t.reshape(b, t, h, d), heads[0].transpose(0, 2, 1, 3))
    np.testing.assert_array_equal(lse_t, lse)
    joined = np.stack([x.transpose(0, 2, 1, 3) for x in heads[1:]], 2)
    np.testing.assert_array_equal(grad.reshape(b, t, 3, h, d), joined)
    want = _torch(_split_qkv(arrays, h), dtype, scale, causal)
    got = [o_t.reshape(b, t, h, d).transpose(0, 2, 1, 3), lse_t]
    got += list(grad.reshape(b, t, 3, h, d).transpose(2, 0, 3, 1, 4))
    _check(got, want, 2e-5)


@pytest.mark.parametrize("t", [150, 5])
def test_token_major_layouts_same_bits_at_any_thread_count(runner, t):
    arrays = _qkv_inputs(2, 4, t, 40, True)
    results = [_both_layouts(runner, arrays, "bf16", 4, 0.2, True, threads)[1] for threads in (1, 2, 7)]
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


def test_joined_needs_the_heads_of_one_fused_qkv():
    """Grouped-query heads, other lengths, widths or batches have no qkv layout: refused, naming the shapes."""
    ctx = gg.Context(n_tensors=64)
    q = ctx.new_tensor("f32", (16, 10, 4, 2))
    lse = ctx.new_tensor("f32", (10, 4, 2))
    for kshape, vshape in (((16, 10, 2, 2), (16, 10, 2, 2)),    # grouped-query
                           ((16, 12, 4, 2), (16, 12, 4, 2)),    # other keys than queries
                           ((16, 10, 4, 2), (8, 10, 4, 2)),     # v narrower
                           ((16, 10, 4, 1), (16, 10, 4, 1))):   # k, v broadcast over the batch
        k, v = ctx.new_tensor("f32", kshape), ctx.new_tensor("f32", vshape)
        o = ctx.new_tensor("f32", (vshape[0], 10, 4, 2))
        kernels.flash_attn_back(ctx, q, k, v, o, o, lse)   # the head-major layout takes them
        with pytest.raises(ShapeError, match=r"flash_attn_back: joined needs .*k ne=\[" + str(kshape[0])):
            kernels.flash_attn_back(ctx, q, k, v, o, o, lse, joined=True)


def test_bad_operands_are_refused():
    ctx = gg.Context(n_tensors=32)
    q = ctx.new_tensor("f32", (16, 10, 4, 2))
    k = ctx.new_tensor("f32", (16, 12, 3, 2))
    v = ctx.new_tensor("f32", (8, 12, 4, 2))
    with pytest.raises(ShapeError, match="flash_attn: q ne=.*don't fit"):
        kernels.flash_attn(ctx, q, k, v)   # 4 query heads over 3 kv heads
    k2 = ctx.new_tensor("f32", (16, 12, 2, 2))
    v2 = ctx.new_tensor("f32", (8, 12, 2, 2))
    with pytest.raises(DTypeError, match="one type"):
        kernels.flash_attn(ctx, q, k2, ctx.new_tensor("f16", (8, 12, 2, 2)))
    with pytest.raises(ShapeError, match="mask must be"):
        kernels.flash_attn(ctx, q, k2, v2, ctx.new_tensor("f32", (12, 9, 1, 1)))   # fewer rows than queries
    with pytest.raises(ShapeError, match="contiguous rows"):
        kernels.flash_attn(ctx, ops.transpose(ctx, ctx.new_tensor("f32", (10, 16, 4, 2))), k2, v2)
    wide = ctx.new_tensor("f32", (300, 10, 4, 2))
    with pytest.raises(ShapeError, match="<= 256"):
        kernels.flash_attn(ctx, wide, ctx.new_tensor("f32", (300, 12, 2, 2)), v2)
    o, lse = kernels.flash_attn(ctx, q, k2, v2)
    with pytest.raises(ShapeError, match="do must be f32"):
        kernels.flash_attn_back(ctx, q, k2, v2, o, ctx.new_tensor("f32", (8, 10, 4, 1)), lse)
    with pytest.raises(ArgumentError, match="offset"):
        kernels.flash_attn(ctx, q, k2, v2, causal=True, offset=2**30)
