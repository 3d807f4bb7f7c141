"""MultiheadAttention's one-op self-attention (autograd/ops/attention.py): values and gradients as torch's
on copied weights, with every kind of mask; create_graph's second derivatives; autocast; which calls take it."""

import collections

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
from ggrad.autograd import primitive
from torch_parity_util import copy_weights

torch = pytest.importorskip("torch")
B, T, E, H = 3, 6, 16, 4


def _inputs(seed=0, batch=B):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, T, E)).astype(np.float32)


def _mha(batch_first=True):
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(E, H, batch_first=batch_first)
    return copy_weights(nn.MultiheadAttention(E, H, batch_first=batch_first), theirs)


class _Recorded:
    """The names of the primitives recorded inside the block."""

    def __enter__(self):
        self.counts = collections.Counter()
        self._original = primitive.Primitive._record.__func__
        original, counts = self._original, self.counts

        def record(cls, ctx, args, tensors):
            counts[cls.__name__] += 1
            return original(cls, ctx, args, tensors)
        primitive.Primitive._record = classmethod(record)
        return self.counts

    def __exit__(self, *exc):
        primitive.Primitive._record = classmethod(self._original)


def _masks(kind):
    """(ggrad kwargs, torch kwargs) for one kind of mask."""
    causal = np.triu(np.ones((T, T), bool), 1)
    padding = np.zeros((B, T), bool)
    padding[0, -2:] = True
    additive = np.random.default_rng(3).standard_normal((T, T)).astype(np.float32)
    if kind == "none":
        return {}, {}
    if kind == "causal_bool":
        return dict(attn_mask=causal), dict(attn_mask=torch.tensor(causal))
    if kind == "additive":
        return dict(attn_mask=ggrad.tensor(additive)), dict(attn_mask=torch.tensor(additive))
    if kind == "padding":
        return dict(key_padding_mask=padding), dict(key_padding_mask=torch.tensor(padding))
    if kind == "per_head":
        per_head = np.random.default_rng(4).standard_normal((B * H, T, T)).astype(np.float32)
        return dict(attn_mask=ggrad.tensor(per_head)), dict(attn_mask=torch.tensor(per_head))
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["none", "causal_bool", "additive", "padding", "per_head"])
@pytest.mark.parametrize("batch_first", [True, False])
def test_values_and_gradients_as_torch(kind, batch_first):
    ours, theirs = _mha(batch_first)
    x = _inputs()
    if not batch_first:
        x = np.ascontiguousarray(x.transpose(1, 0, 2))
    kw_o, kw_t = _masks(kind)
    xo = ggrad.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    with _Recorded() as recorded:
        out = ours(xo, xo, xo, need_weights=False, **kw_o)[0]
        (out * out).sum().backward()
    expected = theirs(xt, xt, xt, need_weights=False, **kw_t)[0]
    (expected * expected).sum().backward()
    assert recorded["SelfAttention"] == 1 and recorded["SelfAttentionBack"] == 1
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ours.in_proj_weight.grad.numpy(), theirs.in_proj_weight.grad.numpy(),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ours.in_proj_bias.grad.numpy(), theirs.in_proj_bias.grad.numpy(),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("choices", ["RPC", "CUDA", "VULKAN"])
@pytest.mark.parametrize("batch", [B, H + 1])
def test_every_backends_choices_as_torch(no_graph_cache, choices, batch):
    """The GPUs' lowerings (built and run on the CPU): under CUDA's, the products of v and k and the k and v
    gradients by out_prod of the heads' views, with the batch dim or (more batches than heads) the heads'
    dim GGML's outer one."""
    from ggrad.autograd import execution, lowering
    ours, theirs = _mha()
    x = _inputs(6, batch)
    causal = np.triu(np.ones((T, T), bool), 1)
    with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, choices)):
        xo = ggrad.tensor(x, requires_grad=True)
        out = ours(xo, xo, xo, need_weights=False, attn_mask=causal)[0]
        (out * out).sum().backward()
        got = out.numpy(), xo.grad.numpy(), ours.in_proj_weight.grad.numpy()
    xt = torch.tensor(x, requires_grad=True)
    expected = theirs(xt, xt, xt, need_weights=False, attn_mask=torch.tensor(causal))[0]
    (expected * expected).sum().backward()
    for mine, want in zip(got, (expected.detach(), xt.grad, theirs.in_proj_weight.grad)):
        np.testing.assert_allclose(mine, want.numpy(), rtol=1e-4, atol=1e-4)


def test_unbatched_input_as_torch():
    ours, theirs = _mha()
    x = _inputs()[0]
    xo, xt = ggrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out = ours(xo, xo, xo, need_weights=False, is_causal=False)[0]
    expected = theirs(xt, xt, xt, need_weights=False)[0]
    out.sum().backward()
    expected.sum().backward()
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_second_derivatives_as_torch():
    """A gradient penalty: create_graph takes the backward in differentiable Tensor ops."""
    ours, theirs = _mha()
    x = _inputs(1)
    causal = np.triu(np.ones((T, T), bool), 1)
    xo, xt = ggrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out = ours(xo, xo, xo, need_weights=False, attn_mask=causal)[0]
    # torch's need_weights=True takes its math path: its fused kernel has no second derivative
    expected = theirs(xt, xt, xt, need_weights=True, attn_mask=torch.tensor(causal))[0]
    g, = ggrad.autograd.grad((out * out).sum(), xo, create_graph=True)
    gt, = torch.autograd.grad((expected * expected).sum(), xt, create_graph=True)
    (g * g).sum().backward()
    (gt * gt).sum().backward()
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(ours.in_proj_weight.grad.numpy(), theirs.in_proj_weight.grad.numpy(),
                               rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("call", ["weights", "dropout", "cross", "grad_mask"])
def test_other_calls_take_the_general_path(call):
    ours, _ = _mha()
    x = ggrad.tensor(_inputs(), requires_grad=True)
    kwargs = dict(need_weights=False)
    query = key = x
    if call == "weights":
        kwargs["need_weights"] = True
    elif call == "dropout":
        ours.dropout = 0.5
    elif call == "cross":
        key = ggrad.tensor(_inputs(2))
    else:
        kwargs["attn_mask"] = ggrad.zeros(T, T, requires_grad=True)
    with _Recorded() as recorded:
        out = ours(query, key, key, **kwargs)[0]
        out.sum().backward()
    assert recorded["SelfAttention"] == 0 and recorded["SoftmaxExt"] == 1


def test_an_attention_mask_that_requires_grad_gets_its_gradient_as_torch():
    ours, theirs = _mha()
    x = _inputs()
    m = np.random.default_rng(5).standard_normal((T, T)).astype(np.float32)
    mo, mt = ggrad.tensor(m, requires_grad=True), torch.tensor(m, requires_grad=True)
    ours(ggrad.tensor(x), ggrad.tensor(x), ggrad.tensor(x), need_weights=False, attn_mask=mo)[0].sum().backward()
    xt = torch.tensor(x)
    theirs(xt, xt, xt, need_weights=False, attn_mask=mt)[0].sum().backward()
    np.testing.assert_allclose(mo.grad.numpy(), mt.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("choices", ["CPU", "CUDA"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_autocast_gives_the_low_precision_output_of_the_general_path(no_graph_cache, dtype, choices):
    """Under autocast qkv is low precision, the products sum in float32 and the output is in the autocast
    dtype, as the general path's (which rounds nothing else either); the input's gradient is float32. Under
    CUDA's choices the one-op path casts qkv to float32 for its out_prods; its gradient at qkv is rounded
    to the half dtype as the general path's."""
    from ggrad.autograd import execution, lowering
    ours, _ = _mha()
    low = getattr(ggrad, dtype)
    x = _inputs()
    results = []
    for need_weights in (False, True):   # True: the general path (the weights are not returned here)
        xo = ggrad.tensor(x, requires_grad=True)
        with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, choices)):
            with ggrad.autocast("cpu", dtype=low):
                out = ours(xo, xo, xo, need_weights=need_weights)[0]
            assert out.dtype is low
            out.float().sum().backward()
            assert xo.grad.dtype is ggrad.float32
            results.append((out.float().numpy(), xo.grad.numpy()))
        ours.zero_grad()
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_under_autocast_the_gradient_goes_to_the_float32_projection_uncast(dtype):
    """Under autocast qkv is the projection's rounded result: the one-op attention computes from it and keeps
    it, and gives the gradient to the projection's float32 result in float32 (no rounding of it to the
    autocast dtype and cast back: two casts of a (B, T, 3E) tensor a layer fewer); the gradients match the
    general path's."""
    ours, _ = _mha()
    low = getattr(ggrad, dtype)
    x = _inputs()
    grads = []
    for need_weights in (False, True):   # True: the general path
        xo = ggrad.tensor(x, requires_grad=True)
        with ggrad.autocast("cpu", dtype=low):
            out = ours(xo, xo, xo, need_weights=need_weights)[0]
        back = []
        original = primitive.Primitive._record.__func__

        def record(cls, ctx, args, tensors):
            result = original(cls, ctx, args, tensors)
            if cls.__name__ == "SelfAttentionBack":
                back.append(result.dtype)
            return result
        primitive.Primitive._record = classmethod(record)
        try:
            out.float().sum().backward()
        finally:
            primitive.Primitive._record = classmethod(original)
        assert back == ([] if need_weights else [ggrad.float32])
        grads.append((xo.grad.numpy(), ours.in_proj_weight.grad.numpy()))
        ours.zero_grad()
    for mine, general in zip(*grads):
        np.testing.assert_allclose(mine, general, rtol=2e-2, atol=2e-2)


def test_a_transformer_step_replays_its_cached_graph_with_the_same_losses():
    """Three steps of a transformer block with and without the graph cache give the same losses."""
    from ggrad.autograd import execution, trace_cache
    losses = {}
    for cache in (True, False):
        was = trace_cache.ENABLED
        execution.set_graph_cache(cache)
        try:
            ggrad.manual_seed(0)
            block = nn.TransformerBlock(E, H)
            opt = ggrad.optim.AdamW(block.parameters(), lr=1e-2)
            x = ggrad.tensor(_inputs())
            run = []
            for _ in range(3):
                loss = (block(x) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                run.append(loss.item())
            losses[cache] = run
        finally:
            execution.set_graph_cache(was)
    assert losses[True] == losses[False]
    assert losses[True][2] < losses[True][0]


@pytest.mark.parametrize("need_weights", [False, True])
def test_a_half_model_gives_half_results_as_torch(need_weights):
    """model.half(): output and weights float16 on both paths (the general path's weights were float32)."""
    ours, theirs = _mha()
    ours, theirs = ours.half(), theirs.half()
    x = _inputs(7).astype(np.float16)
    out, weights = ours(*[ggrad.tensor(x)] * 3, need_weights=need_weights)
    expected, expected_weights = theirs(*[torch.tensor(x)] * 3, need_weights=need_weights)
    assert out.dtype is ggrad.float16 and expected.dtype is torch.float16
    np.testing.assert_allclose(out.float().numpy(), expected.float().detach().numpy(), rtol=1e-2, atol=1e-2)
    if need_weights:
        assert weights.dtype is ggrad.float16 and expected_weights.dtype is torch.float16
        np.testing.assert_allclose(weights.float().numpy(), expected_weights.float().detach().numpy(), atol=1e-2)
