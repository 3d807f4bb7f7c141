"""MultiheadAttention's is_causal hint as torch's, and TransformerEncoder's eval-mode nested-tensor path
(zeros at padded positions) exactly when torch takes it; values against torch on copied weights."""

import warnings

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
from torch_parity_util import copy_weights

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(23)
B, T, E, H = 3, 5, 8, 2


def _randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _mha():
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(E, H, batch_first=True)
    return copy_weights(nn.MultiheadAttention(E, H, batch_first=True), theirs)


def test_is_causal_without_attn_mask_raises_as_torch():
    ours, theirs = _mha()
    x = _randn(B, T, E)
    for m, t in ((ours, ggrad.tensor(x)), (theirs, torch.tensor(x))):
        with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
            m(t, t, t, is_causal=True)


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("train", [True, False])
def test_is_causal_hint_with_a_non_causal_mask_as_torch(need_weights, padding, train):
    """torch uses the causal mask instead of attn_mask only with no key_padding_mask and need_weights=False;
    otherwise attn_mask (here all zeros: no masking) and the hint is ignored."""
    ours, theirs = _mha()
    ours.train(train), theirs.train(train)
    x = _randn(B, T, E)
    kpm = np.zeros((B, T), bool)
    kpm[0, -2:] = True
    kw_o = dict(attn_mask=ggrad.tensor(np.zeros((T, T), np.float32)), need_weights=need_weights, is_causal=True)
    kw_t = dict(attn_mask=torch.zeros(T, T), need_weights=need_weights, is_causal=True)
    if padding:
        kw_o["key_padding_mask"], kw_t["key_padding_mask"] = kpm, torch.tensor(kpm)
    with torch.no_grad():
        expected = theirs(*[torch.tensor(x)] * 3, **kw_t)[0].numpy()
    got = ours(*[ggrad.tensor(x)] * 3, **kw_o)[0].numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    causal_used = not padding and not need_weights
    with torch.no_grad():
        causal = theirs(*[torch.tensor(x)] * 3, attn_mask=torch.nn.Transformer.generate_square_subsequent_mask(T),
                        need_weights=False)[0].numpy()
    assert np.allclose(expected, causal, atol=1e-5) == causal_used


def _encoder(batch_first=True, nhead=H, norm=True, **kwargs):
    torch.manual_seed(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tl = torch.nn.TransformerEncoderLayer(E, nhead, 16, 0.0, batch_first=batch_first)
        te = torch.nn.TransformerEncoder(tl, 2, torch.nn.LayerNorm(E) if norm else None, **kwargs)
        ol = nn.TransformerEncoderLayer(E, nhead, 16, 0.0, batch_first=batch_first)
        oe = nn.TransformerEncoder(ol, 2, nn.LayerNorm(E) if norm else None, **kwargs)
    with torch.no_grad():
        for p in te.parameters():
            p.add_(torch.randn_like(p) * 0.1)   # nonzero norm biases: the final norm's output at zeros shows
    copy_weights(oe, te)
    assert oe.use_nested_tensor == te.use_nested_tensor
    return oe, te


def _run(oe, te, x, kpm, no_grad=True, mask=None):
    kpm_o = kpm
    if no_grad:
        with torch.no_grad(), ggrad.no_grad():
            return (oe(ggrad.tensor(x), mask=mask, src_key_padding_mask=kpm_o).numpy(),
                    te(torch.tensor(x), mask=None if mask is None else torch.tensor(mask),
                       src_key_padding_mask=torch.tensor(kpm)).numpy())
    return (oe(ggrad.tensor(x), src_key_padding_mask=kpm_o).numpy(),
            te(torch.tensor(x), src_key_padding_mask=torch.tensor(kpm)).detach().numpy())


def _left_aligned_padding():
    kpm = np.zeros((B, T), bool)
    kpm[0, 3:] = True
    kpm[2, 1:] = True
    return kpm


@pytest.mark.parametrize("norm", [True, False])
def test_eval_no_grad_zeroes_padded_positions_as_torch(norm):
    oe, te = _encoder(norm=norm)
    oe.eval(), te.eval()
    x, kpm = _randn(B, T, E), _left_aligned_padding()
    ours, theirs = _run(oe, te, x, kpm)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
    padded = theirs[kpm]
    if norm:
        np.testing.assert_allclose(padded, np.broadcast_to(te.norm.bias.detach().numpy(), padded.shape), atol=1e-6)
    else:
        assert np.all(padded == 0)


@pytest.mark.parametrize("case", ["training", "grad", "not_left_aligned", "odd_heads", "batch_second",
                                  "disabled", "with_mask"])
def test_no_nested_path_keeps_computed_values_as_torch(case):
    """Where torch does not take the path, padded positions hold computed values, in both."""
    oe, te = _encoder(batch_first=case != "batch_second", nhead=1 if case == "odd_heads" else H,
                      enable_nested_tensor=case != "disabled")
    if case != "training":
        oe.eval(), te.eval()
    x, kpm = _randn(B, T, E), _left_aligned_padding()
    if case == "not_left_aligned":
        kpm[1, 0] = True
    if case == "batch_second":
        x = x.transpose(1, 0, 2).copy()
    mask = np.zeros((T, T), np.float32) if case == "with_mask" else None
    ours, theirs = _run(oe, te, x, kpm, no_grad=case != "grad", mask=mask)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
    padded = theirs[kpm] if case != "batch_second" else theirs.transpose(1, 0, 2)[kpm]
    assert not np.allclose(padded, np.broadcast_to(te.norm.bias.detach().numpy(), padded.shape), atol=1e-4)


def test_nested_tensor_warning_as_torch():
    for lib in (nn, torch.nn):
        layer = lib.TransformerEncoderLayer(E, H, 16, batch_first=False)
        with pytest.warns(UserWarning, match="enable_nested_tensor is True, but self.use_nested_tensor is False "
                                             "because encoder_layer.self_attn.batch_first was not True"):
            lib.TransformerEncoder(layer, 1)
