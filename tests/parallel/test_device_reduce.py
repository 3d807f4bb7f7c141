"""The gradient all-reduce on the devices (device_reduce.py): GGML's copies between the replicas' devices and
sums in their update graphs keep the replicas bitwise identical, give the single-device result, and read no
gradient into Python. Two replicas here: the CPU and an RPC server serving the CPU."""

import numpy as np
import pytest

import ggrad
from ggrad import nn, optim
from ggrad.autograd.device_copy import copy_to_device
from ggrad.parallel import DataParallel, dp_train
from ggrad.parallel.device_reduce import bucket_ranges


@pytest.fixture(scope="module")
def two_devices(rpc_device):
    return ["cpu", rpc_device.name]


def _model():
    ggrad.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 24), nn.Tanh(), nn.Linear(24, 16), nn.GELU(), nn.Linear(16, 3))


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 6)).astype(np.float32)
    return x, x[:, :3].argmax(1).astype(np.int32)


class _HostReduced(DataParallel):
    reduce_on_devices = False   # the buckets summed on the host in float64, as before device reduction


def test_bucket_ranges_hold_whole_parameters():
    assert bucket_ranges([4, 4, 4], 8) == [(0, 2), (2, 3)]
    assert bucket_ranges([10, 3, 3], 8) == [(0, 1), (1, 3)]      # a larger parameter alone
    assert bucket_ranges([3, 3, 3], 100) == [(0, 3)]
    assert bucket_ranges([], 8) == []


def test_copy_to_device_moves_the_bytes_exactly(two_devices):
    x = np.random.default_rng(1).standard_normal((5, 7)).astype(np.float32)
    t = ggrad.tensor(x) * 3.0    # pending: computed first
    moved = copy_to_device(t, two_devices[1])
    assert moved.device.name == two_devices[1] and moved.shape == (5, 7) and not moved.requires_grad
    assert np.array_equal(moved.numpy(), (ggrad.tensor(x) * 3.0).numpy())
    back = copy_to_device(moved + 1.0, "cpu")
    assert np.array_equal(back.numpy(), moved.numpy() + np.float32(1.0))
    assert np.array_equal(copy_to_device(ggrad.tensor(x).t(), two_devices[1]).numpy(), x.T)   # a view


def test_bucket_mb_is_checked(two_devices):
    with pytest.raises(ValueError, match="bucket_mb"):
        DataParallel(_model(), two_devices, optim.SGD(_model().parameters(), lr=0.1), bucket_mb=0)


def test_replicas_stay_bitwise_identical_for_50_steps_and_match_one_device(two_devices):
    """AdamW with clipping, several buckets; the whole batch on one device is the reference."""
    x, y = _data()
    single = _model()
    opt = optim.AdamW(single.parameters(), lr=1e-2)
    want = []
    for _ in range(50):
        loss = ggrad.cross_entropy(single(ggrad.tensor(x)), ggrad.tensor(y))
        opt.zero_grad()
        loss.backward()
        ggrad.nn.utils.clip_grad_norm_(single.parameters(), 0.5)
        opt.step()
        want.append(loss.item())
    model = _model()
    dp = DataParallel(model, two_devices, optim.AdamW(model.parameters(), lr=1e-2), bucket_mb=2e-3)
    try:
        got = [dp.step(x, y, ggrad.cross_entropy, max_grad_norm=0.5) for _ in range(50)]
    finally:
        dp.close()
    gradient_bytes = 4 * sum(p.numel() for p in model.parameters())
    assert dp.reduce_bytes == 2 * gradient_bytes   # each replica pulled the other's buckets
    for a, b in zip(dp.replicas[0].parameters(), dp.replicas[1].parameters()):
        assert np.array_equal(a.numpy(), b.numpy()), "replicas must stay identical bit for bit"
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    for a, b in zip(dp.module.parameters(), single.parameters()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-3, atol=1e-4)


def test_two_replicas_get_the_host_reductions_bytes(two_devices):
    """For two replicas the float32 sum on the devices is the float64 host sum rounded to float32 (an exact
    sum of two floats, rounded once): both paths train to the same bytes."""
    x, y = _data(seed=2)
    weights = []
    for kind in (DataParallel, _HostReduced):
        model = _model()
        dp = kind(model, two_devices, optim.SGD(model.parameters(), lr=0.1, momentum=0.9), bucket_mb=1e-3)
        try:
            for _ in range(10):
                dp.step(x, y, ggrad.cross_entropy)
        finally:
            dp.close()
        weights.append([p.numpy() for p in dp.module.parameters()])
    for a, b in zip(*weights):
        assert np.array_equal(a, b)


def test_no_gradient_is_read_into_python(two_devices):
    """Only the shards' losses are read; the gradients go from device to device."""
    x, y = _data()
    model = _model()
    dp = DataParallel(model, two_devices, optim.SGD(model.parameters(), lr=0.1))
    try:
        dp.step(x, y, ggrad.cross_entropy)
        before = ggrad.stats()["bytes_read"]
        dp.step(x, y, ggrad.cross_entropy)
        read = ggrad.stats()["bytes_read"] - before
    finally:
        dp.close()
    assert read < 4 * sum(p.numel() for p in model.parameters()) // 4, f"{read} bytes read in a step"


def test_dp_train_with_uneven_shards_reduces_on_the_devices(two_devices):
    """A batch smaller than the devices leaves one replica without a shard: it only pulls, sums and updates."""
    x, y = _data(n=64)
    batches = [(x[i:i + 16], y[i:i + 16]) for i in range(0, 48, 16)] + [(x[48:49], y[48:49])]
    model = _model()
    history = dp_train(model, optim.SGD(model.parameters(), lr=0.1), "cross_entropy", batches, devices=two_devices,
                       epochs=2, shard_weights=[1.0, 3.0], bucket_mb=1e-3, verbose=0)
    assert len(history.history["loss"]) == 2
    reference = _model()
    opt = optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(2):
        for xb, yb in batches:
            loss = ggrad.cross_entropy(reference(ggrad.tensor(xb)), ggrad.tensor(yb))
            opt.zero_grad()
            loss.backward()
            opt.step()
    for a, b in zip(model.parameters(), reference.parameters()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)
