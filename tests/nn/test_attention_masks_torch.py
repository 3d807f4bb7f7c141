"""Attention masks exactly as PyTorch: MultiheadAttention (bool True = blocked) and
scaled_dot_product_attention (bool True = attend), float masks added and differentiated, fully blocked rows
(NaN in the module, zeros in sdpa), the mask shapes each accepts, and the errors for the others. Values and
gradients against PyTorch on copied weights."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
import ggrad.nn.functional as F

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(7)
B, L, S, E, H = 2, 3, 4, 8, 2


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def pair(seed=0):
    torch.manual_seed(seed)
    theirs = torch.nn.MultiheadAttention(E, H, batch_first=True)
    with torch.no_grad():
        theirs.in_proj_bias.normal_()
        theirs.out_proj.bias.normal_()
    ours = nn.MultiheadAttention(E, H, batch_first=True)
    ours.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def leaf(array):
    return ggrad.tensor(array, requires_grad=True), torch.tensor(array, requires_grad=True)


def close(ours, theirs, atol=2e-5):
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-4, atol=atol, equal_nan=True)


def bool_mask(shape, p=0.4):
    return RNG.random(shape) < p


MHA_MASKS = {
    "2d": (L, S),
    "3d": (B * H, L, S),
}


@pytest.mark.parametrize("shape", list(MHA_MASKS.values()), ids=list(MHA_MASKS))
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_mha_attn_mask_values_and_gradients(shape, kind):
    ours, theirs = pair()
    q_np, kv_np = randn(B, L, E), randn(B, S, E)
    q, tq = leaf(q_np)
    kv, tkv = leaf(kv_np)
    if kind == "bool":
        m = bool_mask(shape, 0.3)
        m[..., 0] = False   # every row keeps a key: finite gradients to compare
        ours_mask, their_mask = m, torch.tensor(m)
    else:
        ours_mask, their_mask = leaf(randn(*shape))
    out, w = ours(q, kv, kv, attn_mask=ours_mask, need_weights=True)
    t_out, t_w = theirs(tq, tkv, tkv, attn_mask=their_mask, need_weights=True)
    close(out, t_out)
    close(w, t_w)
    (out * ggrad.tensor(np.arange(out.numel(), dtype=np.float32).reshape(out.shape) / 10)).sum().backward()
    (t_out * torch.arange(t_out.numel(), dtype=torch.float32).reshape(t_out.shape) / 10).sum().backward()
    close(q.grad, tq.grad, 1e-4)
    close(kv.grad, tkv.grad, 1e-4)
    close(ours.in_proj_weight.grad, theirs.in_proj_weight.grad, 1e-4)
    if kind == "float":   # the mask requires grad: it gets its gradient
        close(ours_mask.grad, their_mask.grad, 1e-4)


def test_mha_bool_mask_is_not_added_as_zero_one():
    """True blocks: the weight of a blocked key is exactly 0 (the old code added 1.0 to it)."""
    ours, theirs = pair()
    x = randn(B, L, E)
    m = np.zeros((L, L), dtype=bool)
    m[:, 1] = True
    _, w = ours(ggrad.tensor(x), attn_mask=m, need_weights=True)
    _, t_w = theirs(torch.tensor(x), torch.tensor(x), torch.tensor(x), attn_mask=torch.tensor(m))
    assert np.all(w.numpy()[:, :, 1] == 0)
    close(w, t_w)


def test_mha_key_padding_and_attn_mask_together():
    ours, theirs = pair(1)
    x = randn(B, S, E)
    pad = np.zeros((B, S), dtype=bool)
    pad[0, -1] = pad[1, :2] = True
    attn = bool_mask((S, S), 0.2)
    np.fill_diagonal(attn, False)
    out, w = ours(ggrad.tensor(x), key_padding_mask=pad, attn_mask=attn, need_weights=True,
                  average_attn_weights=False)
    tx = torch.tensor(x)
    t_out, t_w = theirs(tx, tx, tx, key_padding_mask=torch.tensor(pad), attn_mask=torch.tensor(attn),
                        average_attn_weights=False)
    close(out, t_out)
    close(w, t_w)


@pytest.mark.parametrize("which", ["attn_mask", "key_padding_mask"])
def test_mha_fully_blocked_rows_are_nan_as_torch(which):
    ours, theirs = pair(2)
    x = randn(B, S, E)
    if which == "attn_mask":
        m = np.zeros((S, S), dtype=bool)
        m[1] = True               # query 1 may attend nothing
    else:
        m = np.zeros((B, S), dtype=bool)
        m[0] = True               # batch item 0 has only padding
    out, w = ours(ggrad.tensor(x), **{which: m}, need_weights=True)
    tx = torch.tensor(x)
    t_out, t_w = theirs(tx, tx, tx, **{which: torch.tensor(m)})
    assert np.isnan(t_out.detach().numpy()).any()
    close(out, t_out)
    close(w, t_w)


@pytest.mark.parametrize("shape,their_error", [((2, 2), RuntimeError), ((5, S, S), RuntimeError)])
def test_mha_wrong_attn_mask_shape_raises_torch_type(shape, their_error):
    ours, theirs = pair()
    x = randn(B, S, E)
    tx = torch.tensor(x)
    with pytest.raises(their_error):
        theirs(tx, tx, tx, attn_mask=torch.zeros(shape, dtype=torch.bool))
    with pytest.raises(their_error, match="attn_mask"):
        ours(ggrad.tensor(x), attn_mask=np.zeros(shape, dtype=bool))


def test_mha_wrong_key_padding_shape_raises_torch_type():
    ours, theirs = pair()
    x = randn(B, S, E)
    tx = torch.tensor(x)
    with pytest.raises(AssertionError):
        theirs(tx, tx, tx, key_padding_mask=torch.zeros(B, S + 1, dtype=torch.bool))
    with pytest.raises(AssertionError, match="key_padding_mask"):
        ours(ggrad.tensor(x), key_padding_mask=np.zeros((B, S + 1), dtype=bool))


SDPA_MASKS = {"LS": (L, S), "1LS": (1, L, S), "BHLS": (B, H, L, S), "B1LS": (B, 1, L, S),
              "BH1S": (B, H, 1, S)}


@pytest.mark.parametrize("shape", list(SDPA_MASKS.values()), ids=list(SDPA_MASKS))
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_sdpa_masks_values_and_gradients(shape, kind):
    (q, tq), (k, tk), (v, tv) = (leaf(randn(B, H, n, E // H)) for n in (L, S, S))
    if kind == "bool":
        m = bool_mask(shape, 0.6)
        m[..., 0] = True   # True = attend: every row keeps key 0
        ours_mask, their_mask = m, torch.tensor(m)
    else:
        ours_mask, their_mask = leaf(randn(*shape))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=ours_mask)
    t_out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=their_mask)
    close(out, t_out)
    weight = np.linspace(-1, 1, out.numel(), dtype=np.float32).reshape(out.shape)
    (out * ggrad.tensor(weight)).sum().backward()
    (t_out * torch.tensor(weight)).sum().backward()
    for ours_t, their_t in ((q, tq), (k, tk), (v, tv)):
        close(ours_t.grad, their_t.grad, 1e-4)
    if kind == "float":
        close(ours_mask.grad, their_mask.grad, 1e-4)


@pytest.mark.parametrize("kind", ["bool", "float_-inf", "tensor_float"])
def test_sdpa_fully_blocked_rows_are_zero_with_zero_gradients(kind):
    (q, tq), (k, tk), (v, tv) = (leaf(randn(B, H, n, E // H)) for n in (L, S, S))
    keep = np.ones((L, S), dtype=bool)
    keep[1] = False
    keep[2, 1:] = False
    if kind == "bool":
        ours_mask, their_mask = keep, torch.tensor(keep)
    else:
        additive = np.where(keep, 0.0, -np.inf).astype(np.float32)
        ours_mask = additive if kind == "float_-inf" else ggrad.tensor(additive)
        their_mask = torch.tensor(additive)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=ours_mask)
    t_out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=their_mask)
    assert np.all(out.numpy()[:, :, 1] == 0)
    close(out, t_out)
    out.sum().backward()
    t_out.sum().backward()
    for ours_t, their_t in ((q, tq), (k, tk), (v, tv)):
        assert np.isfinite(ours_t.grad.numpy()).all()
        close(ours_t.grad, their_t.grad, 1e-4)


def test_sdpa_is_causal_matches_torch():
    (q, tq), (k, tk), (v, tv) = (leaf(randn(B, H, n, E // H)) for n in (L, S, S))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    t_out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    close(out, t_out)
    out.sum().backward()
    t_out.sum().backward()
    close(q.grad, tq.grad, 1e-4)


def test_sdpa_mask_that_does_not_broadcast_raises_torch_type():
    q, k, v = (ggrad.tensor(randn(B, H, n, E // H)) for n in (L, S, S))
    tq, tk, tv = (torch.tensor(t.numpy()) for t in (q, k, v))
    bad = np.zeros((2, S), dtype=bool)
    with pytest.raises(RuntimeError):
        torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.tensor(bad))
    with pytest.raises(RuntimeError, match="scaled_dot_product_attention"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=bad)
