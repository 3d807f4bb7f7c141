"""Data-parallel training: the batch split across devices gives the single-device result, and runs at once."""

import time

import numpy as np
import pytest

import ggrad
import ggrad.ggml as gg
from ggrad import nn, optim
from ggrad.parallel import DataParallel, dp_train, split_sizes


def _model():
    ggrad.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def _data(n=48, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 6)).astype(np.float32)
    y = (x[:, :3].argmax(1)).astype(np.int32)
    return x, y


def _single_device_losses(x, y, steps):
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        loss = ggrad.cross_entropy(model(ggrad.tensor(x)), ggrad.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, losses


def test_split_sizes():
    assert split_sizes(10, 3) == [4, 3, 3] and split_sizes(4, 4) == [1, 1, 1, 1]
    with pytest.raises(ValueError, match="cannot be split"):
        split_sizes(2, 3)


def test_devices_must_be_distinct():
    with pytest.raises(ValueError, match="distinct"):
        DataParallel(_model, ["cpu", "cpu"], lambda p: optim.SGD(p, lr=0.1))


@pytest.fixture(scope="module")
def two_devices(request):
    if not gg.has_backend("RPC"):
        pytest.skip("needs a second device: GGML built with RPC (CMAKE_ARGS=-DGGML_RPC=ON, see README)")
    server = request.getfixturevalue("server")
    rpc = gg.rpc_add_server(server)[0]
    return ["cpu", rpc.name]


def test_split_batch_matches_single_device_training(two_devices):
    x, y = _data()
    reference, ref_losses = _single_device_losses(x, y, steps=5)
    dp = DataParallel(_model, two_devices, lambda p: optim.SGD(p, lr=0.1))
    losses = [dp.step(x, y, ggrad.cross_entropy) for _ in range(5)]
    dp.close()
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    for a, b in zip(dp.replicas[0].parameters(), dp.replicas[1].parameters()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)   # replicas stay identical
    for a, b in zip(dp.module.parameters(), reference.parameters()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)
    assert dp.replicas[1].parameters().__next__().device.name == two_devices[1]


def test_devices_compute_at_the_same_time(two_devices, monkeypatch):
    """Each device's graph runs in its own thread; their compute intervals overlap."""
    from ggrad.autograd import execution
    intervals = []
    real = execution.realize

    def timed(device, eval_callback=None):
        t0 = time.perf_counter()
        real(device, eval_callback)
        intervals.append((t0, time.perf_counter()))
    monkeypatch.setattr(execution, "realize", timed)
    big = lambda: nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 4))  # noqa: E731
    dp = DataParallel(big, two_devices, lambda p: optim.SGD(p, lr=0.01))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 256)).astype(np.float32)
    y = rng.integers(0, 4, 512).astype(np.int32)
    intervals.clear()
    dp.step(x, y, ggrad.cross_entropy)
    dp.close()
    (a0, a1), (b0, b1) = intervals[:2]
    assert max(a0, b0) < min(a1, b1), f"device computes did not overlap: {intervals[:2]}"


def test_dp_train_learns(two_devices):
    x, y = _data(n=256)
    model, history = dp_train(_model, lambda p: optim.AdamW(p, lr=1e-2), ggrad.cross_entropy, x, y, two_devices,
                              epochs=8, batch_size=64, verbose=0)
    assert history[-1] < 0.5 * history[0]
    acc = (model(ggrad.tensor(x)).numpy().argmax(1) == y).mean()
    assert acc > 0.8
