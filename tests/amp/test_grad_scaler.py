"""ggrad.amp.GradScaler against torch.amp.GradScaler on a scripted sequence: good steps, an injected inf
(skipped step, scale backoff), growth after the interval, parameter groups, state_dict round trip."""

import math

import numpy as np
import pytest

import ggrad
from ggrad import nn, optim
from ggrad.amp import GradScaler

torch = pytest.importorskip("torch")

SETTINGS = dict(init_scale=2.0 ** 10, growth_factor=2.0, backoff_factor=0.5, growth_interval=3)
# step i: True = a gradient element is made inf after backward (the step must be skipped)
SCRIPT = [False, False, True, False, False, False, False, True, True, False]


def _models():
    torch.manual_seed(0)
    t = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2, bias=False))
    g = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2, bias=False))
    g.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    return g, t


def test_scripted_sequence_matches_torch():
    g_model, t_model = _models()
    # two parameter groups with their own learning rates
    g_opt = optim.SGD([{"params": list(g_model[0].parameters()), "lr": 0.1},
                       {"params": list(g_model[2].parameters()), "lr": 0.05}], momentum=0.9)
    t_opt = torch.optim.SGD([{"params": list(t_model[0].parameters()), "lr": 0.1},
                             {"params": list(t_model[2].parameters()), "lr": 0.05}], momentum=0.9)
    g_scaler, t_scaler = GradScaler("cpu", **SETTINGS), torch.amp.GradScaler("cpu", **SETTINGS)
    rng = np.random.default_rng(1)
    for step, inject in enumerate(SCRIPT):
        x, y = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((5, 2)).astype(np.float32)
        g_loss = ggrad.mse_loss(g_model(ggrad.tensor(x)), ggrad.tensor(y))
        t_loss = torch.nn.functional.mse_loss(t_model(torch.tensor(x)), torch.tensor(y))
        g_opt.zero_grad()
        t_opt.zero_grad()
        g_scaler.scale(g_loss).backward()
        t_scaler.scale(t_loss).backward()
        if inject:
            bad = np.zeros((6, 4), dtype=np.float32)
            bad[1, 2] = math.inf if step % 2 else math.nan
            g_model[0].weight.grad = g_model[0].weight.grad + ggrad.tensor(bad)
            t_model[0].weight.grad += torch.tensor(bad)
        before = [p.numpy().copy() for p in g_model.parameters()]
        g_scaler.step(g_opt)
        t_scaler.step(t_opt)
        g_scaler.update()
        t_scaler.update()
        assert g_scaler.get_scale() == t_scaler.get_scale(), f"step {step}"
        for i, (gp, tp) in enumerate(zip(g_model.parameters(), t_model.parameters())):
            np.testing.assert_allclose(gp.numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=f"step {step} parameter {i}")
            if inject:
                np.testing.assert_array_equal(gp.numpy(), before[i])
    assert g_scaler.state_dict() == t_scaler.state_dict()
    # the script: backoff at steps 2, 7, 8; growth after 3 good steps (3, 4, 5)
    assert g_scaler.get_scale() == 2.0 ** 10 * 0.5 * 2.0 * 0.5 * 0.5


def test_state_dict_round_trip_and_disabled():
    scaler = GradScaler(init_scale=8.0, growth_interval=5)
    scaler._growth_tracker = 3
    other = GradScaler()
    other.load_state_dict(scaler.state_dict())
    assert other.state_dict() == {"scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 5,
                                  "_growth_tracker": 3}
    off = GradScaler(enabled=False)
    assert off.state_dict() == {} and off.get_scale() == 1.0 and not off.is_enabled()
    with pytest.raises(RuntimeError, match="state dict is empty"):
        GradScaler().load_state_dict({})
    x = ggrad.tensor(np.float32(3.0))
    assert off.scale(x) is x


def test_unscale_then_clip_and_misuse():
    model, _ = _models()
    opt = optim.AdamW(model.parameters(), lr=1e-2)
    scaler = GradScaler(init_scale=256.0)
    loss = model(ggrad.randn(3, 4)).sum()
    scaler.scale(loss).backward()
    raw = model[0].weight.grad.numpy().copy()
    scaler.unscale_(opt)
    np.testing.assert_allclose(model[0].weight.grad.numpy(), raw / 256.0, rtol=1e-6)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 256.0


def test_float16_gradients_refused():
    lin = nn.Linear(3, 2).half()
    opt = optim.SGD(lin.parameters(), lr=0.1)
    scaler = GradScaler()
    scaler.scale(lin(ggrad.randn(2, 3).half()).float().sum()).backward()
    with pytest.raises(ValueError, match="unscale FP16 gradients"):
        scaler.step(opt)


def test_one_compute_per_step():
    """The inf check is one scalar per device and the skip is decided in the graph: step() computes
    backward, check and update as one graph (as a plain optimizer step)."""
    model, _ = _models()
    for opt in (optim.SGD(model.parameters(), lr=0.1), optim.AdamW(model.parameters())):
        scaler = GradScaler()
        for _ in range(2):
            opt.zero_grad()
            scaler.scale(model(ggrad.randn(3, 4)).sum()).backward()
            before = ggrad.stats()["computes"]
            scaler.step(opt)
            assert ggrad.stats()["computes"] - before == 1
            scaler.update()
