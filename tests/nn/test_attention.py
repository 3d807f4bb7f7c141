"""MultiHeadAttention, scaled_dot_product_attention and TransformerBlock against numpy implementations
(values and finite-difference gradients), masks, the fused projection, and PyTorch when installed."""

import math

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
import ggrad.nn.functional as F
from gradcheck_util import check

RNG = np.random.default_rng(2)
NEG = -1e30


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_attention(q, k, v, mask=None, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    w = np_softmax(s if mask is None else s + mask)
    return w @ v, w


def np_mha(xq, xk, xv, wq, wk, wv, b_in, wo, bo, heads, mask=None):
    """The textbook computation: three projections, a loop over heads, concatenation, output projection."""
    e = wq.shape[0]
    dh = e // heads
    q, k, v = xq @ wq.T + b_in[:e], xk @ wk.T + b_in[e:2 * e], xv @ wv.T + b_in[2 * e:]
    outs, weights = [], []
    for h in range(heads):
        cols = slice(h * dh, (h + 1) * dh)
        m = mask
        if mask is not None and mask.ndim == 4:  # (B or 1, H or 1, T, S)
            m = np.broadcast_to(mask, mask.shape[:1] + (heads,) + mask.shape[2:])[:, h]
        o, w = np_attention(q[..., cols], k[..., cols], v[..., cols], m)
        outs.append(o)
        weights.append(w)
    return np.concatenate(outs, -1) @ wo.T + bo, np.stack(weights, 1)


def causal(t, s):
    return np.triu(np.full((t, s), NEG), 1)


def _randomise(module):
    """Non-zero biases, so that every parameter's gradient is exercised."""
    with ggrad.no_grad():
        for p in module.parameters():
            p.copy_(ggrad.tensor(randn(*p.shape) * 0.5))


# ---- MultiHeadAttention ------------------------------------------------------------------------
def test_self_attention_fused_qkv_matches_numpy_with_gradients():
    e, h = 8, 2
    mha = nn.MultiHeadAttention(e, h, batch_first=True)
    _randomise(mha)
    assert mha.in_proj_weight.shape == (3 * e, e) and mha.q_proj_weight is None

    def ref(x, w_in, b_in, wo, bo):
        return np_mha(x, x, x, w_in[:e], w_in[e:2 * e], w_in[2 * e:], b_in, wo, bo, h, causal(4, 4))[0]

    check(lambda x: mha(x, x, x, is_causal=True)[0], ref, [randn(2, 4, e)],
          [mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias], atol=1e-4, rtol=1e-4)


def test_separate_kdim_vdim_matches_numpy_with_gradients():
    e, h = 8, 4
    mha = nn.MultiHeadAttention(e, h, kdim=5, vdim=3, batch_first=True)
    _randomise(mha)
    assert mha.in_proj_weight is None and mha.k_proj_weight.shape == (e, 5) and mha.v_proj_weight.shape == (e, 3)
    names = [n for n, _ in mha.named_parameters()]
    assert names == ["q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias", "out_proj.weight",
                     "out_proj.bias"]

    def ref(q, k, v, wq, wk, wv, b_in, wo, bo):
        return np_mha(q, k, v, wq, wk, wv, b_in, wo, bo, h)[0]

    check(lambda q, k, v: mha(q, k, v)[0], ref, [randn(2, 3, e), randn(2, 5, 5), randn(2, 5, 3)],
          [mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight, mha.in_proj_bias, mha.out_proj.weight,
           mha.out_proj.bias])


@pytest.mark.parametrize("same_kv", [True, False])
def test_cross_attention_with_the_fused_weight(same_kv):
    e, h = 6, 3
    mha = nn.MultiHeadAttention(e, h, batch_first=True)
    _randomise(mha)

    def ref(q, k, *rest):
        v = k if same_kv else rest[0]
        w_in, b_in, wo, bo = rest[-4:]
        return np_mha(q, k, v, w_in[:e], w_in[e:2 * e], w_in[2 * e:], b_in, wo, bo, h)[0]

    inputs = [randn(2, 3, e), randn(2, 4, e)] + ([] if same_kv else [randn(2, 4, e)])
    fn = (lambda q, k: mha(q, k, k)[0]) if same_kv else (lambda q, k, v: mha(q, k, v)[0])
    check(fn, ref, inputs, [mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias])


def _count_matmuls(monkeypatch):
    from ggrad.autograd.ops import products
    calls = []
    for product in (products.MatMulNT, products.Linear):   # the bare product, and with a bias added in it
        def counted(*a, original=product.apply):
            calls.append(a[0].shape)
            return original(*a)
        monkeypatch.setattr(product, "apply", counted)
    return calls


def test_one_projection_matmul_and_batched_heads(monkeypatch):
    calls = _count_matmuls(monkeypatch)
    mha = nn.MultiHeadAttention(16, 4, batch_first=True)
    x = ggrad.randn(2, 5, 16)
    mha(x)
    # qkv projection, scores, weighted values, output projection: no per-head or per-q/k/v matmuls.
    assert len(calls) == 4, calls
    assert calls[1] == (2, 4, 5, 4)                   # all heads in one batched matmul: (B, H, T, Dh)
    calls.clear()
    mha(x, ggrad.randn(2, 7, 16))                     # key is value: q and a fused kv projection
    assert len(calls) == 5


def test_key_padding_mask_gives_masked_keys_zero_weight():
    e, h, b, t = 8, 2, 3, 5
    mha = nn.MultiHeadAttention(e, h, batch_first=True)
    _randomise(mha)
    x = randn(b, t, e)
    pad = np.zeros((b, t), bool)
    pad[0, 3:] = True
    pad[1, 1:] = True
    pad[2, :] = True                                  # every key masked: NaN, as PyTorch
    out, weights = mha(ggrad.tensor(x), key_padding_mask=pad, need_weights=True, average_attn_weights=False)
    w = weights.numpy()
    assert w.shape == (b, h, t, t) and np.isfinite(w[:2]).all() and np.isnan(w[2]).all()
    assert np.isnan(out.numpy()[2]).all() and np.isfinite(out.numpy()[:2]).all()
    assert (w[0][..., 3:] == 0).all() and (w[1][..., 1:] == 0).all()
    np.testing.assert_allclose(w[:2].sum(-1), 1.0, rtol=1e-5)
    params = [p.numpy() for p in (mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias)]
    w_in = params[0]
    mask = np.where(pad, NEG, 0.0)[:, None, None, :]
    expected, expected_w = np_mha(x, x, x, w_in[:e], w_in[e:2 * e], w_in[2 * e:], params[1], params[2], params[3],
                                  h, mask)
    np.testing.assert_allclose(out.numpy()[:2], expected[:2], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w[:2], expected_w[:2], rtol=1e-4, atol=1e-6)
    # The same mask as an int32 Tensor, and the gradient with it (no fully masked row: finite differences).
    pad[2, :] = False
    pad[2, 0] = True
    mask = np.where(pad, NEG, 0.0)[:, None, None, :]
    check(lambda xx: mha(xx, key_padding_mask=ggrad.tensor(pad.astype(np.int32)))[0],
          lambda xx, *p: np_mha(xx, xx, xx, p[0][:e], p[0][e:2 * e], p[0][2 * e:], p[1], p[2], p[3], h, mask)[0],
          [x], [mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias])


def test_causal_mask_and_its_host_cache():
    e, h, t = 8, 2, 6
    mha = nn.MultiHeadAttention(e, h, batch_first=True)
    x = randn(1, t, e)
    F.causal_mask_host.cache_clear()
    _, w = mha(ggrad.tensor(x), is_causal=True, need_weights=True)
    w = w.numpy()[0]
    assert (w[np.triu_indices(t, 1)] == 0).all() and (w[np.tril_indices(t)] > 0).all()
    mha(ggrad.tensor(x), is_causal=True)
    info = F.causal_mask_host.cache_info()
    assert info.misses == 1 and info.hits == 1
    # Changing a later token never changes earlier outputs.
    x2 = x.copy()
    x2[0, 4:] += 1.0
    a = mha(ggrad.tensor(x), is_causal=True)[0].numpy()
    b = mha(ggrad.tensor(x2), is_causal=True)[0].numpy()
    np.testing.assert_allclose(a[0, :4], b[0, :4], rtol=1e-6, atol=1e-6)
    assert not np.allclose(a[0, 4:], b[0, 4:])


@pytest.mark.parametrize("kind", ["bool2d", "bool3d", "float2d", "int4d", "causal+bool"])
def test_attn_mask_forms(kind):
    e, h, b, t = 4, 2, 2, 3
    mha = nn.MultiHeadAttention(e, h, batch_first=True)
    x = randn(b, t, e)
    bool_mask = RNG.random((t, t)) < 0.4
    np.fill_diagonal(bool_mask, False)
    kwargs = {}
    if kind == "bool2d":
        mask, additive = bool_mask, np.where(bool_mask, NEG, 0.0)
    elif kind == "bool3d":
        full = RNG.random((b * h, t, t)) < 0.4
        full[:, np.arange(t), np.arange(t)] = False     # every row keeps a key (else NaN, as PyTorch)
        mask, additive = full, np.where(full, NEG, 0.0).reshape(b, h, t, t)
    elif kind == "float2d":
        mask = randn(t, t)
        additive = mask.astype(np.float64)
    elif kind == "int4d":
        full = (RNG.random((b, 1, t, t)) < 0.4)
        full[..., np.arange(t), np.arange(t)] = False
        mask, additive = ggrad.tensor(full.astype(np.int32)), np.where(full, NEG, 0.0)
    else:
        mask, additive = bool_mask, np.where(bool_mask, NEG, 0.0) + causal(t, t)
        kwargs = {"is_causal": True}
    out, w = mha(ggrad.tensor(x), attn_mask=mask, need_weights=True, **kwargs)
    p = [q.numpy() for q in (mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias)]
    expected, expected_w = np_mha(x, x, x, p[0][:e], p[0][e:2 * e], p[0][2 * e:], p[1], p[2], p[3], h, additive)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w.numpy(), expected_w.mean(1), rtol=1e-4, atol=1e-6)  # averaged over heads


def test_batch_first_false_and_unbatched_inputs():
    mha = nn.MultiHeadAttention(4, 2, batch_first=False)
    x = randn(3, 2, 4)                                # (T, B, E)
    out, _ = mha(ggrad.tensor(x))
    mha.batch_first = True
    out_bf, _ = mha(ggrad.tensor(x.transpose(1, 0, 2)))
    np.testing.assert_allclose(out.numpy(), out_bf.numpy().transpose(1, 0, 2), rtol=1e-5, atol=1e-6)
    single, w = mha(ggrad.tensor(x[:, 0]), key_padding_mask=np.array([False, False, True]), need_weights=True)
    assert single.shape == (3, 4) and w.shape == (3, 3) and (w.numpy()[:, 2] == 0).all()


def test_attention_dropout_only_in_training():
    mha = nn.MultiHeadAttention(8, 2, dropout=0.5, batch_first=True)
    x = ggrad.tensor(randn(2, 6, 8))
    _, w = mha(x, need_weights=True, average_attn_weights=False)
    w = w.numpy()
    assert (w == 0).mean() > 0.3                      # dropped weights (survivors scaled by 2)
    mha.eval()
    a, wa = mha(x, need_weights=True)
    b, _ = mha(x)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_allclose(wa.numpy().sum(-1), 1.0, rtol=1e-5)


def test_mha_input_checks():
    with pytest.raises(ValueError, match=r"embed_dim \(10\) must be divisible by num_heads \(3\)"):
        nn.MultiHeadAttention(10, 3)
    mha = nn.MultiHeadAttention(8, 2, batch_first=True)
    x = ggrad.randn(2, 3, 8)
    with pytest.raises(ggrad.ShapeError, match="expected query with embed_dim=8 features, got shape \\(2, 3, 6\\)"):
        mha(ggrad.randn(2, 3, 6))
    with pytest.raises(ggrad.ShapeError, match=r"attn_mask of shape \(3, 4\) should be \(L, S\) = \(3, 3\)"):
        mha(x, attn_mask=np.zeros((3, 4), bool))
    with pytest.raises(ggrad.ShapeError, match=r"key_padding_mask of shape \(3, 3\) should be \(N, S\) = \(2, 3\)"):
        mha(x, key_padding_mask=np.zeros((3, 3), bool))
    with pytest.raises(ggrad.ShapeError, match="must share the batch size"):
        mha(x, ggrad.randn(3, 3, 8))
    with pytest.raises(ggrad.ShapeError, match="must be 3-D"):
        mha(x, ggrad.randn(3, 8))
    with pytest.raises(TypeError, match="boolean, integer or float"):
        mha(x, attn_mask=np.array([["a"] * 3] * 3))


def test_mha_repr_and_alias():
    assert issubclass(nn.MultiheadAttention, nn.MultiHeadAttention)   # torch's is_causal rule on top
    text = repr(nn.MultiHeadAttention(8, 2, dropout=0.1, kdim=4, vdim=4))
    assert text.startswith("MultiHeadAttention(\n  embed_dim=8, num_heads=2, dropout=0.1, kdim=4, vdim=4\n")
    assert "(out_proj): Linear(in_features=8, out_features=8, bias=True)" in text


def test_mha_matches_torch():
    torch = pytest.importorskip("torch")
    for kwargs in ({}, {"kdim": 5, "vdim": 3}):
        ours = nn.MultiHeadAttention(8, 2, **kwargs, batch_first=True)
        _randomise(ours)
        theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True, **kwargs)
        theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
        q, k, v = randn(2, 4, 8), randn(2, 6, kwargs.get("kdim", 8)), randn(2, 6, kwargs.get("vdim", 8))
        pad = np.zeros((2, 6), bool)
        pad[1, 4:] = True
        attn = RNG.random((4, 6)) < 0.3
        attn[:, 0] = False
        out, w = ours(ggrad.tensor(q), ggrad.tensor(k), ggrad.tensor(v), attn_mask=attn, key_padding_mask=pad,
                      need_weights=True)
        t_out, t_w = theirs(torch.tensor(q), torch.tensor(k), torch.tensor(v), key_padding_mask=torch.tensor(pad),
                            attn_mask=torch.tensor(attn), need_weights=True)
        np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(w.numpy(), t_w.detach().numpy(), rtol=1e-4, atol=1e-6)


# ---- scaled_dot_product_attention --------------------------------------------------------------
def test_sdpa_matches_numpy_with_gradients():
    def ref(q, k, v):
        return np_attention(q, k, v)[0]

    check(F.scaled_dot_product_attention, ref, [randn(2, 3, 4, 5), randn(2, 3, 6, 5), randn(2, 3, 6, 2)])
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
          lambda q, k, v: np_attention(q, k, v, causal(4, 4), 0.3)[0], [randn(2, 4, 3), randn(2, 4, 3),
                                                                       randn(2, 4, 3)])


def test_sdpa_masks_follow_pytorch_conventions():
    q, k, v = randn(2, 2, 3, 4), randn(2, 2, 5, 4), randn(2, 2, 5, 4)
    keep = RNG.random((3, 5)) < 0.6                   # sdpa: True = takes part (unlike MultiHeadAttention)
    keep[:, 0] = True
    out = F.scaled_dot_product_attention(ggrad.tensor(q), ggrad.tensor(k), ggrad.tensor(v), attn_mask=keep)
    np.testing.assert_allclose(out.numpy(), np_attention(q, k, v, np.where(keep, 0.0, NEG))[0], rtol=1e-4, atol=1e-5)
    bias = randn(2, 1, 3, 5)
    out = F.scaled_dot_product_attention(ggrad.tensor(q), ggrad.tensor(k), ggrad.tensor(v),
                                         attn_mask=ggrad.tensor(bias))
    np.testing.assert_allclose(out.numpy(), np_attention(q, k, v, bias)[0], rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="either attn_mask or is_causal"):
        F.scaled_dot_product_attention(ggrad.tensor(q), ggrad.tensor(k), ggrad.tensor(v), attn_mask=keep,
                                       is_causal=True)
    with pytest.raises(ggrad.ShapeError, match=r"attention mask of shape \(4, 5\) cannot be broadcast"):
        F.scaled_dot_product_attention(ggrad.tensor(q), ggrad.tensor(k), ggrad.tensor(v),
                                       attn_mask=np.ones((4, 5), bool))
    with pytest.raises(ggrad.ShapeError, match="don't fit"):
        F.scaled_dot_product_attention(ggrad.tensor(q), ggrad.tensor(k), ggrad.tensor(randn(2, 2, 4, 4)))
    torch = pytest.importorskip("torch")
    expected = torch.nn.functional.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v),
                                                                attn_mask=torch.tensor(keep))
    out = F.scaled_dot_product_attention(ggrad.tensor(q), ggrad.tensor(k), ggrad.tensor(v), attn_mask=keep)
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-4, atol=1e-5)


# ---- TransformerBlock --------------------------------------------------------------------------
def _np_block(x, p, heads, act):
    def ln(z, w, b):
        mu = z.mean(-1, keepdims=True)
        return (z - mu) / np.sqrt(((z - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * w + b

    e = x.shape[-1]
    h = ln(x, p["ln1.weight"], p["ln1.bias"])
    w_in = p["attn.in_proj_weight"]
    a, _ = np_mha(h, h, h, w_in[:e], w_in[e:2 * e], w_in[2 * e:], p["attn.in_proj_bias"], p["attn.out_proj.weight"],
                  p["attn.out_proj.bias"], heads, causal(x.shape[1], x.shape[1]))
    x = x + a
    h = ln(x, p["ln2.weight"], p["ln2.bias"]) @ p["fc1.weight"].T + p["fc1.bias"]
    return x + act(h) @ p["fc2.weight"].T + p["fc2.bias"]


def test_transformer_block_matches_numpy_with_gradients():
    block = nn.TransformerBlock(4, 2, d_ff=6, activation="relu")
    _randomise(block)
    names = [n for n, _ in block.named_parameters()]
    params = [p for _, p in block.named_parameters()]

    def ref(x, *values):
        return _np_block(x, dict(zip(names, values)), 2, lambda z: np.maximum(z, 0))

    check(block, ref, [randn(2, 3, 4)], params, grad_atol=2e-3)


def test_transformer_block_defaults_masks_and_repr():
    block = nn.TransformerBlock(8, 2)
    assert block.d_ff == 32 and isinstance(block.act, nn.GELU) and block.causal
    x = ggrad.randn(2, 5, 8)
    pad = np.zeros((2, 5), bool)
    pad[0, 1:] = True
    assert block(x, key_padding_mask=pad).shape == (2, 5, 8)
    assert "TransformerBlock(\n  d_model=8, n_heads=2, d_ff=32, causal=True\n  (ln1): LayerNorm" in repr(block)
    with pytest.raises(ValueError, match="activation must be one of"):
        nn.TransformerBlock(8, 2, activation="swish")
    assert isinstance(nn.TransformerBlock(8, 2, activation=nn.SiLU()).act, nn.SiLU)


def test_mha_defaults_and_positional_arguments_are_torchs():
    """batch_first=False and need_weights=True by default, and forward's positional order (query, key,
    value, key_padding_mask, need_weights, attn_mask), as torch.nn.MultiheadAttention."""
    torch = pytest.importorskip("torch")
    ours = nn.MultiHeadAttention(8, 2)
    _randomise(ours)
    theirs = torch.nn.MultiheadAttention(8, 2)
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    assert ours.batch_first is theirs.batch_first is False
    x = randn(5, 3, 8)   # (T, B, E)
    pad = np.zeros((3, 5), bool)
    pad[2, 3:] = True
    for args in ((), (pad,), (pad, False)):
        g_out, g_w = ours(ggrad.tensor(x), ggrad.tensor(x), ggrad.tensor(x), *args)
        t_out, t_w = theirs(torch.tensor(x), torch.tensor(x), torch.tensor(x), *(torch.tensor(a) if isinstance(a, np.ndarray) else a for a in args))
        np.testing.assert_allclose(g_out.numpy(), t_out.detach().numpy(), rtol=1e-4, atol=1e-5)
        assert (g_w is None) == (t_w is None)
        if t_w is not None:
            np.testing.assert_allclose(g_w.numpy(), t_w.detach().numpy(), rtol=1e-4, atol=1e-6)
