"""Gradient clipping (ggrad.nn.utils): agreement with torch.nn.utils, laziness, inf/1-norms, edge cases."""

import numpy as np
import pytest

import ggrad
import ggrad.nn.utils as nn_utils
from ggrad import nn


def _grads(seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) * scale for s in [(4, 3), (3,), (2, 2, 2)]]


def _ggrad_params(grads):
    params = []
    for g in grads:
        p = ggrad.zeros(*g.shape, requires_grad=True)
        p.grad = ggrad.tensor(g)
        params.append(p)
    return params


def _torch_params(torch, grads):
    params = []
    for g in grads:
        p = torch.zeros(*g.shape, requires_grad=True)
        p.grad = torch.tensor(g)
        params.append(p)
    return params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    torch = pytest.importorskip("torch")
    grads = _grads()
    ours = _ggrad_params(grads)
    theirs = _torch_params(torch, grads)
    total = nn_utils.clip_grad_norm_(ours, max_norm, norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
    assert isinstance(total, ggrad.Tensor) and total.shape == ()
    assert total.item() == pytest.approx(expected.item(), rel=1e-5)
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_clip_grad_norm_is_lazy_and_part_of_the_step_graph():
    model = nn.Linear(3, 2)
    opt = ggrad.optim.SGD(model.parameters(), lr=0.1)
    ggrad.realize()
    before = ggrad.stats()["computes"]
    loss = (model(ggrad.ones(4, 3)) ** 2).sum()
    loss.backward()
    total = nn_utils.clip_grad_norm_(model.parameters(), 0.1)
    assert ggrad.stats()["computes"] == before  # nothing computed yet
    opt.step()
    assert ggrad.stats()["computes"] == before + 1
    total.item()
    assert ggrad.stats()["computes"] == before + 1  # the norm came with the step
    norm = np.sqrt(sum(float((p.grad.numpy() ** 2).sum()) for p in model.parameters()))
    assert norm == pytest.approx(0.1, rel=1e-4)


def test_clip_grad_value_matches_torch():
    torch = pytest.importorskip("torch")
    grads = _grads(scale=2.0)
    ours = _ggrad_params(grads)
    theirs = _torch_params(torch, grads)
    nn_utils.clip_grad_value_(ours, 0.7)
    torch.nn.utils.clip_grad_value_(theirs, 0.7)
    for p, q in zip(ours, theirs):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


def test_clip_accepts_a_single_tensor_and_skips_missing_grads():
    p = ggrad.zeros(3, requires_grad=True)
    q = ggrad.zeros(3, requires_grad=True)
    p.grad = ggrad.tensor([3.0, 4.0, 0.0])
    total = nn_utils.clip_grad_norm_([p, q], max_norm=1.0)
    assert total.item() == pytest.approx(5.0)
    assert q.grad is None
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8, 0.0], rtol=1e-5)
    assert nn_utils.clip_grad_norm_(q, 1.0).item() == 0.0
    nn_utils.clip_grad_value_(p, 0.5)
    np.testing.assert_allclose(p.grad.numpy(), [0.5, 0.5, 0.0], rtol=1e-6)


def test_clip_float16_gradients():
    p = ggrad.zeros(2, dtype=ggrad.float16, requires_grad=True)
    p.grad = ggrad.tensor(np.array([300.0, 400.0], np.float16))
    assert nn_utils.clip_grad_norm_(p, 1.0).item() == pytest.approx(500.0, rel=1e-3)
    assert p.grad.dtype is ggrad.float16
    np.testing.assert_allclose(p.grad.numpy().astype(np.float32), [0.6, 0.8], rtol=2e-3)


def test_clip_errors():
    p = ggrad.zeros(2, requires_grad=True)
    p.grad = ggrad.tensor([np.inf, 1.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn_utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    with pytest.raises(ValueError, match="Invalid norm_type"):
        nn_utils.clip_grad_norm_(p, 1.0, norm_type=0)
    with pytest.raises(ValueError, match="Invalid clip_value"):
        nn_utils.clip_grad_value_(p, -1.0)
