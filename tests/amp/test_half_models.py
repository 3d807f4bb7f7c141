"""Half precision models: Module.half/bfloat16/to(dtype)/float, their forward, training and checkpoints."""

import numpy as np
import pytest

import ggrad
from ggrad import nn, optim


def _model():
    ggrad.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4))


@pytest.mark.parametrize("convert, dtype", [(lambda m: m.half(), ggrad.float16),
                                            (lambda m: m.bfloat16(), ggrad.bfloat16),
                                            (lambda m: m.to(ggrad.bfloat16), ggrad.bfloat16),
                                            (lambda m: m.to(dtype=ggrad.float16), ggrad.float16)])
def test_conversions_and_forward(convert, dtype):
    model = _model()
    x = ggrad.randn(5, 8)
    want = model(x).numpy()
    params = list(model.parameters())
    assert convert(model) is model
    assert [p for p in model.parameters()] == params   # the same Parameter objects (optimizers keep them)
    assert all(p.dtype is dtype for p in params)
    out = model(x.to(dtype))
    assert out.dtype is dtype
    np.testing.assert_allclose(out.float().numpy(), want, rtol=0.05, atol=0.05)
    model.float()
    assert all(p.dtype is ggrad.float32 for p in model.parameters())


@pytest.mark.parametrize("dtype", [ggrad.float16, ggrad.bfloat16], ids=["f16", "bf16"])
def test_checkpoint_keeps_dtype(tmp_path, dtype):
    model = _model().to(dtype)
    path = tmp_path / "half.ggrad"
    ggrad.save(model.state_dict(), path)
    loaded = ggrad.load(path)
    for name, t in model.state_dict().items():
        assert loaded[name].dtype is dtype, name
        np.testing.assert_array_equal(loaded[name].float().numpy(), t.float().numpy())
    fresh = _model().to(dtype)
    for p in fresh.parameters():
        p.requires_grad_(False)
        p.mul_(0.0)
        p.requires_grad_(True)
    fresh.load_state_dict(loaded)
    x = ggrad.randn(3, 8).to(dtype)
    np.testing.assert_array_equal(fresh(x).float().numpy(), model(x).float().numpy())


@pytest.mark.parametrize("dtype", [ggrad.float16, ggrad.bfloat16], ids=["f16", "bf16"])
def test_half_model_trains(dtype):
    model = _model().to(dtype)
    opt = optim.AdamW(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    x = ggrad.tensor(rng.standard_normal((32, 8)).astype(np.float32)).to(dtype)
    y = ggrad.tensor(rng.integers(0, 4, 32).astype(np.int32))
    losses = []
    for _ in range(30):
        loss = ggrad.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(p.dtype is dtype and p.grad.dtype is dtype for p in model.parameters())
    assert losses[-1] < 0.7 * losses[0], losses
