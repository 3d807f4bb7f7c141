"""Attention by ggrad's flash attention kernels (Lowering.attention "kernel", forced on the CPU as a CUDA device
with ggrad's twins chooses it for half operands): scaled_dot_product_attention and MultiheadAttention against
PyTorch, values and gradients, with no softmax node and no (..., L, S) tensor in the graph; the paths the
kernels don't take (weights returned, dropout, a mask that requires grad) keep GGML's ops; second
derivatives through the composed formula; the char-GPT's step equal to the composed lowering's."""

import dataclasses

import numpy as np
import pytest

import ggrad
from ggrad.autograd import execution, lowering

torch = pytest.importorskip("torch")

CPU = ggrad.device("cpu")
KERNEL = dataclasses.replace(lowering.CPU, attention="kernel")
HALF_KERNEL = dataclasses.replace(lowering.CPU, attention="half_kernel")


def _ops(fn):
    with ggrad.profile() as prof:
        out = fn()
        ggrad.realize()
    return out, set(prof.by_op())


def _arrays(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _sdpa_both(arrays, choices=KERNEL, dtype=None, **kwargs):
    """(ggrad's out, dq, dk, dv, ops ran) and PyTorch's (out, dq, dk, dv) for sdpa on q, k, v, g."""
    q_np, k_np, v_np, g_np = arrays
    with execution.forced_lowering(CPU, choices):
        q, k, v = (ggrad.tensor(a, requires_grad=True) for a in (q_np, k_np, v_np))

        def run():
            args = [t if dtype is None else t.to(dtype) for t in (q, k, v)]
            out = ggrad.nn.functional.scaled_dot_product_attention(*args, **kwargs)
            (out.float() * ggrad.tensor(g_np)).sum().backward()
            return out.float().numpy()
        out, ran = _ops(run)
    mask = kwargs.pop("attn_mask", None)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q_np, k_np, v_np))
    args = [t if dtype is None else t.to(torch.bfloat16) for t in (tq, tk, tv)]
    want = torch.nn.functional.scaled_dot_product_attention(
        *args, attn_mask=None if mask is None else torch.tensor(np.asarray(mask)), **kwargs)
    (want.float() * torch.tensor(g_np)).sum().backward()
    return ((out, q.grad.numpy(), k.grad.numpy(), v.grad.numpy(), ran),
            (want.float().detach().numpy(), tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()))


def _close(got, want, tol):
    for name, g, w in zip(("out", "dq", "dk", "dv"), got, want):
        scale = float(np.abs(w).max())
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale, err_msg=name)


@pytest.mark.parametrize("case", [
    dict(q=(2, 3, 37, 33), k=(2, 3, 37, 33), dv=33, is_causal=True),
    dict(q=(2, 3, 37, 33), k=(2, 3, 45, 33), dv=20),
    dict(q=(2, 4, 20, 16), k=(2, 2, 30, 16), dv=24, enable_gqa=True),
    dict(q=(5, 20, 16), k=(5, 30, 16), dv=16, float_mask=True),
    dict(q=(2, 4, 20, 16), k=(2, 4, 30, 16), dv=16, bool_mask=True, scale=0.3),
    dict(q=(20, 128), k=(25, 128), dv=128, is_causal=True),
])
def test_sdpa_by_the_kernels_matches_torch(case):
    case = dict(case)
    q_shape, k_shape, dv = case.pop("q"), case.pop("k"), case.pop("dv")
    arrays = _arrays(q_shape, k_shape, k_shape[:-1] + (dv,), q_shape[:-1] + (dv,))
    rows, cols = q_shape[-2], k_shape[-2]
    if case.pop("float_mask", False):
        case["attn_mask"] = _arrays((rows, cols), seed=5)[0]
    if case.pop("bool_mask", False):
        mask = np.random.default_rng(3).random((2, 1, rows, cols)) > 0.3
        mask[0, 0, 4] = False   # a row with no key: zeros, and no gradient from it
        case["attn_mask"] = mask
    got, want = _sdpa_both(arrays, **case)
    assert {"FLASH_ATTN", "FLASH_ATTN_BACK"} <= got[4] and not {"SOFTMAX_F32", "SOFT_MAX", "SOFT_MAX_BACK"} & got[4]
    _close(got[:4], want, 1e-5)


def test_sdpa_half_operands_by_the_kernels_under_half_kernel():
    """"half_kernel" (CUDA's choice) takes bfloat16 operands and leaves float32 to GGML's ops."""
    arrays = _arrays((2, 4, 64, 32), (2, 4, 64, 32), (2, 4, 64, 32), (2, 4, 64, 32))
    got, want = _sdpa_both(arrays, HALF_KERNEL, ggrad.bfloat16, is_causal=True)
    assert "FLASH_ATTN_BACK" in got[4]
    _close(got[:4], want, 2e-2)
    got, _ = _sdpa_both(arrays, HALF_KERNEL, is_causal=True)
    assert "FLASH_ATTN" not in got[4]


def test_sdpa_under_autocast_takes_half_operands_without_a_float32_round_trip():
    q_np, k_np, v_np, g_np = _arrays(*[(2, 2, 40, 16)] * 4)
    with execution.forced_lowering(CPU, HALF_KERNEL):
        q, k, v = (ggrad.tensor(a, requires_grad=True) for a in (q_np, k_np, v_np))

        def run():
            with ggrad.autocast("cpu", dtype=ggrad.bfloat16):
                out = ggrad.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            assert out.dtype is ggrad.bfloat16
            (out.float() * ggrad.tensor(g_np)).sum().backward()
            return out.float().numpy()
        out, ran = _ops(run)
    assert "FLASH_ATTN_BACK" in ran
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q_np, k_np, v_np))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    (want.float() * torch.tensor(g_np)).sum().backward()
    _close((out, q.grad.numpy(), k.grad.numpy(), v.grad.numpy()),
           (want.float().detach().numpy(), tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()), 2e-2)


@pytest.mark.parametrize("kwargs", [dict(dropout_p=0.5), dict(attn_mask="grad")])
def test_what_the_kernels_dont_take_keeps_ggmls_ops(kwargs):
    q, k, v = (ggrad.tensor(a, requires_grad=True) for a in _arrays(*[(1, 2, 8, 4)] * 3))
    if kwargs.get("attn_mask") == "grad":
        kwargs = dict(attn_mask=ggrad.zeros(8, 8, requires_grad=True))
    with execution.forced_lowering(CPU, KERNEL):
        _, ran = _ops(lambda: ggrad.nn.functional.scaled_dot_product_attention(q, k, v, **kwargs).sum().backward())
    assert "FLASH_ATTN" not in ran


def test_second_derivatives_through_the_kernels_match_torch():
    q_np, k_np, v_np = _arrays(*[(1, 2, 6, 4)] * 3)
    with execution.forced_lowering(CPU, KERNEL):
        q, k, v = (ggrad.tensor(a, requires_grad=True) for a in (q_np, k_np, v_np))
        out = ggrad.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        gq, = ggrad.autograd.grad((out * out).sum(), q, create_graph=True)
        (gq * gq).sum().backward()
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q_np, k_np, v_np))
    causal = torch.full((6, 6), -torch.inf).triu(1)   # PyTorch's CPU flash kernel has no second derivative
    tout = torch.softmax(tq @ tk.transpose(-1, -2) / 2 + causal, -1) @ tv
    tgq, = torch.autograd.grad((tout * tout).sum(), tq, create_graph=True)
    (tgq * tgq).sum().backward()
    for got, want in ((gq, tgq), (q.grad, tq.grad), (k.grad, tk.grad), (v.grad, tv.grad)):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("masks", ["causal", "padding", "none", "cross"])
def test_multihead_attention_by_the_kernels_matches_torch(masks):
    """The one-op self-attention (causal: the kernels' own rule, no mask read) and the general path. The
    one-op's kernels write O and qkv's gradient in the layouts the projections read: no join, no copy."""
    e, h, b, t = 32, 4, 3, 11
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(e, h, batch_first=True)
    x_np, g_np = _arrays((b, t, e), (b, t, e))
    mem_np = _arrays((b, 7, e), seed=2)[0]
    pad = np.zeros((b, t), bool)
    pad[1, 8:] = True
    kwargs = {"causal": dict(attn_mask=np.triu(np.ones((t, t), bool), 1), is_causal=True),
              "padding": dict(key_padding_mask=pad), "none": {}, "cross": {}}[masks]
    with execution.forced_lowering(CPU, KERNEL):
        mha = ggrad.nn.MultiheadAttention(e, h, batch_first=True)
        mha.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
        x = ggrad.tensor(x_np, requires_grad=True)
        kv = ggrad.tensor(mem_np) if masks == "cross" else x

        def run():
            out, _ = mha(x, kv, kv, need_weights=False, **kwargs)
            (out * ggrad.tensor(g_np)).sum().backward()
            return out.numpy()
        out, ran = _ops(run)
    assert "FLASH_ATTN_BACK" in ran and not {"SOFTMAX_F32", "SOFT_MAX_BACK"} & ran, ran
    if masks != "cross":
        assert not {"CONCAT", "CONCAT_F32"} & ran, ran
    tx = torch.tensor(x_np, requires_grad=True)
    tkv = torch.tensor(mem_np) if masks == "cross" else tx
    tkwargs = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    want, _ = ref(tx, tkv, tkv, need_weights=False, **tkwargs)
    (want * torch.tensor(g_np)).sum().backward()
    np.testing.assert_allclose(out, want.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mha.in_proj_weight.grad.numpy(), ref.in_proj_weight.grad.numpy(), rtol=1e-4,
                               atol=1e-5)


def test_weights_returned_keep_ggmls_ops():
    mha = ggrad.nn.MultiheadAttention(16, 2, batch_first=True)
    x = ggrad.tensor(_arrays((2, 5, 16))[0])
    with execution.forced_lowering(CPU, KERNEL):
        (_, weights), ran = _ops(lambda: mha(x, x, x))
    assert weights.shape == (2, 5, 5) and "FLASH_ATTN" not in ran


@pytest.mark.parametrize("autocast", [False, True])
def test_a_gpt_step_by_the_kernels_equals_the_composed_ops(autocast):
    from ggrad.examples.char_gpt import CharGPT
    results = []
    for choices in (KERNEL, lowering.CPU):
        with execution.forced_lowering(CPU, choices):
            ggrad.manual_seed(0)
            model = CharGPT(32, 32, 2, 2, 16)
            rng = np.random.default_rng(0)
            x = ggrad.tensor(rng.integers(0, 32, (4, 16)).astype(np.int32))
            y = ggrad.tensor(rng.integers(0, 32, 64).astype(np.int32))

            def step():
                with ggrad.autocast("cpu", dtype=ggrad.bfloat16, enabled=autocast):
                    loss = ggrad.cross_entropy(model(x).reshape(-1, 32), y)
                loss.backward()
                return loss.item()
            loss, ran = _ops(step)
            assert ("FLASH_ATTN_BACK" in ran) == (choices is KERNEL)
            results.append([loss] + [p.grad.numpy() for p in model.parameters()])
    tol = 2e-2 if autocast else 1e-5   # bfloat16 rounds P @ V's operands in one path, not the other
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * float(np.abs(want).max()))
