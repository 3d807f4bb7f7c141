"""LoRA adapters (nn.LoRALinear, nn.lora_) on float and quantized Linear layers."""

import numpy as np
import pytest

import ggrad
from ggrad import nn
from ggrad.autograd.raw import to_raw


def test_a_fresh_adapter_leaves_the_output_unchanged_and_trains_only_a_and_b(one_thread):
    base = nn.quantize_(nn.Linear(64, 16), "q4_1")
    layer = nn.LoRALinear(base, r=4, alpha=8)
    x_np = np.random.default_rng(0).standard_normal((5, 64)).astype(np.float32)
    x = ggrad.tensor(x_np, requires_grad=True)
    np.testing.assert_array_equal(layer(x).numpy(), base(x).numpy())
    assert [n for n, p in layer.named_parameters() if p.requires_grad] == ["lora_A", "lora_B"]
    with ggrad.no_grad():
        layer.lora_B.copy_(ggrad.randn(16, 4))
    y = layer(x)
    a, b = layer.lora_A.numpy(), layer.lora_B.numpy()
    w, bias = base.weight.dequantize().numpy(), base.bias.numpy()
    want = x_np @ w.T + bias + (x_np @ a.T @ b.T) * 2.0
    np.testing.assert_allclose(y.numpy(), want, atol=0.02 * np.abs(want).max())
    g = np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)
    y.backward(ggrad.tensor(g))
    np.testing.assert_allclose(layer.lora_B.grad.numpy(), 2.0 * g.T @ (x_np @ a.T), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(layer.lora_A.grad.numpy(), 2.0 * (g @ b).T @ x_np, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(x.grad.numpy(), g @ w + 2.0 * g @ b @ a, rtol=1e-4, atol=1e-4)
    assert base.weight.grad is None and base.bias.grad is None


def test_lora_wraps_the_chosen_linears_freezes_the_rest_and_keeps_the_base_bitwise(one_thread):
    from ggrad.examples.char_gpt import CharGPT
    ggrad.manual_seed(0)
    model = nn.quantize_(CharGPT(96, 64, 1, 2, 16), "q8_0")
    adapters = nn.lora_(model, r=2, modules=lambda name, m: "fc" in name)
    assert isinstance(model.blocks[0].fc1, nn.LoRALinear) and isinstance(model.blocks[0].attn.out_proj, nn.Linear)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable == ["blocks.0.fc1.lora_A", "blocks.0.fc1.lora_B", "blocks.0.fc2.lora_A", "blocks.0.fc2.lora_B"]
    assert len(adapters) == 4
    before = {n: to_raw(p).tobytes() for n, p in model.named_parameters()}
    opt = ggrad.optim.AdamW(adapters, lr=1e-2)
    x = ggrad.tensor(np.random.default_rng(0).integers(0, 96, (2, 16)).astype(np.int32))
    for _ in range(2):
        loss = ggrad.cross_entropy(model(x).reshape(-1, 96), x.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    changed = {n for n, p in model.named_parameters() if to_raw(p).tobytes() != before[n]}
    assert changed == set(trainable)


def test_lora_argument_errors():
    with pytest.raises(TypeError, match="base must be an nn.Linear"):
        nn.LoRALinear(nn.Embedding(4, 8))
    with pytest.raises(ValueError, match="r must be a positive integer"):
        nn.LoRALinear(nn.Linear(8, 8), r=0)
    with pytest.raises(ValueError, match="wrap it with LoRALinear"):
        nn.lora_(nn.Linear(8, 8))
    with pytest.raises(TypeError, match="'1' is a ReLU; only Linear layers apply"):
        nn.lora_(nn.Sequential(nn.Linear(8, 8), nn.ReLU()), modules=["1"])
