"""Meta's Llama rotary embeddings on complex numbers (meta_llama_rope.py), run with PyTorch and with
`import ggrad as torch`: freqs_cis, the rotated queries and keys, an attention block's output and every
gradient equal to PyTorch's."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import ggrad  # noqa: E402

from meta_llama_rope import build  # noqa: E402

REF, OURS = build(torch), build(ggrad)


def test_precompute_freqs_cis_is_pytorchs():
    ref, ours = REF["precompute_freqs_cis"](16, 64), OURS["precompute_freqs_cis"](16, 64)
    assert ours.dtype == ggrad.complex64 and ours.shape == tuple(ref.shape) == (64, 8)
    assert ours.is_complex() and ggrad.is_complex(ours)
    assert ours.numpy().dtype == np.complex64
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-5, atol=2e-6)


def test_apply_rotary_emb_forward_and_backward_equal_pytorchs():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 7, 3, 16), np.float32), rng.standard_normal((2, 7, 3, 16), np.float32)
    weights = rng.standard_normal((2, 7, 3, 16), np.float32)
    results = {}
    for name, lib, code in (("torch", torch, REF), ("ggrad", ggrad, OURS)):
        xq, xk = lib.tensor(q, requires_grad=True), lib.tensor(k, requires_grad=True)
        freqs_cis = code["precompute_freqs_cis"](16, 20)[3:10]
        oq, ok = code["apply_rotary_emb"](xq, xk, freqs_cis)
        ((oq * lib.tensor(weights)).sum() + (oq * ok).sum()).backward()
        results[name] = [t.detach().numpy() for t in (oq, ok, xq.grad, xk.grad)]
    for ours, ref in zip(results["ggrad"], results["torch"]):
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)


def test_attention_block_with_complex_rope_matches_pytorch():
    torch.manual_seed(0)
    ref = REF["Attention"](16, 2, 12)
    ours = OURS["Attention"](16, 2, 12)
    ours.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((2, 5, 16), np.float32)
    yt, yg = ref(torch.tensor(x), start_pos=2), ours(ggrad.tensor(x), start_pos=2)
    np.testing.assert_allclose(yg.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    yt.square().mean().backward()
    yg.square().mean().backward()
    ref_grads = dict(ref.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), ref_grads[name].grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name)
