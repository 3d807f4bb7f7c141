"""Data-parallel training: the batch split across devices gives the single-device result, and runs at once."""

import threading
import time

import numpy as np
import pytest

import ggrad
import ggrad.ggml as gg
from ggrad import nn, optim
from ggrad.parallel import DataParallel, default_devices, dp_train, shard_sizes, split_sizes
from ggrad.train import Callback, History, Trainer


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
    """Each device's graph runs in its own thread, at the same time as the other's: the first compute of
    each device, in the replicas' threads, waits at a barrier for the other's (up to 10 s), which both reach
    only if neither compute waits for the other to end. (Timing the computes' intervals failed once the
    CPU's products got fast enough to end before the other device began.)"""
    from ggrad.autograd import execution
    real = execution.realize
    barrier = threading.Barrier(2, timeout=10.0)
    arrived, met = [], []

    def rendezvous(device, eval_callback=None):
        if threading.current_thread() is not threading.main_thread() and len(arrived) < 2:
            arrived.append(device.name)
            try:
                barrier.wait()
                met.append(device.name)
            except threading.BrokenBarrierError:
                pass
        real(device, eval_callback)
    monkeypatch.setattr(execution, "realize", rendezvous)
    big = lambda: nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 4))  # noqa: E731
    dp = DataParallel(big, two_devices, lambda p: optim.SGD(p, lr=0.01))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 256)).astype(np.float32)
    y = rng.integers(0, 4, 512).astype(np.int32)
    dp.step(x, y, ggrad.cross_entropy)
    dp.close()
    assert sorted(met) == sorted(gg.device(d).name for d in two_devices), f"computes did not overlap: {arrived}"


def test_dp_train_learns(two_devices):
    x, y = _data(n=256)
    model, history = dp_train(_model, lambda p: optim.AdamW(p, lr=1e-2), ggrad.cross_entropy, x, y, two_devices,
                              epochs=8, batch_size=64, verbose=0)
    assert history[-1] < 0.5 * history[0]
    acc = (model(ggrad.tensor(x)).numpy().argmax(1) == y).mean()
    assert acc > 0.8


# ---- dp_train(model, optimizer, loss_fn, data, ...): the fit loop, any batches --------------------------
def _batches(x, y, sizes):
    """(x, y) batches of the given sizes, in order."""
    bounds = np.cumsum([0] + list(sizes))
    return [(x[a:b], y[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def _params(model):
    return [p.numpy().copy() for p in model.parameters()]


def test_shard_sizes_even_weighted_and_short_batches():
    assert shard_sizes(10, [1, 1, 1]) == split_sizes(10, 3) == [4, 3, 3]
    assert shard_sizes(10, [3, 1]) == [8, 2] and shard_sizes(7, [1, 0, 1]) == [4, 0, 3]
    assert shard_sizes(1, [1, 1]) == [1, 0] and shard_sizes(2, [1, 1, 1]) == [1, 1, 0]
    assert shard_sizes(5, [0.2, 0.3, 0.5]) == [1, 2, 2] and sum(shard_sizes(999, [0.1, 0.7, 0.2])) == 999


def test_dp_train_signature_is_the_issues():
    """dp_train shows (help, IDEs, inspect) the signature it runs (bucket_mb: the on-device all-reduce's buckets);
    ggrad.distributed's adds its MPI options (its bucket_mb: MPI's messages)."""
    import inspect
    from ggrad import distributed
    expected = [("model", inspect.Parameter.empty), ("optimizer", inspect.Parameter.empty),
                ("loss_fn", inspect.Parameter.empty), ("data", inspect.Parameter.empty), ("devices", None),
                ("epochs", 1), ("max_steps", None), ("shard_weights", None), ("max_grad_norm", None),
                ("callbacks", ()), ("checkpoint", None), ("checkpoint_every", None), ("resume", None), ("verbose", 1)]
    local = [(p.name, p.default) for p in inspect.signature(dp_train).parameters.values()]
    mpi = [(p.name, p.default) for p in inspect.signature(distributed.dp_train).parameters.values()]
    assert local == expected + [("bucket_mb", 25.0)]
    assert mpi == expected + [("comm", None), ("timeout", 300.0), ("bucket_mb", 25.0)]


def test_dp_train_runs_the_fit_loop_on_the_default_device():
    x, y = _data(n=96)
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    seen = []

    class Batches(Callback):
        def on_batch_end(self, batch, logs=None):
            seen.append((batch, logs["size"], self.model is model, self.trainer.optimizer is opt))

    history = dp_train(model, opt, "cross_entropy", _batches(x, y, [32, 32, 32]), epochs=2, callbacks=[Batches()],
                       verbose=0)
    assert isinstance(history, History) and len(history.history["loss"]) == 2
    assert seen == [(b, 32, True, True) for b in range(3)] * 2
    assert default_devices() == [d for d in gg.devices() if d.kind == "gpu" and d.backend_name != "RPC"] or \
        default_devices() == [gg.device("cpu")]
    # the same as fit over the same batches on one device: one loop
    reference = _model()
    trainer = Trainer(reference)
    trainer.compile(optimizer=optim.SGD(reference.parameters(), lr=0.1), loss="cross_entropy")
    expected = trainer.fit(_batches(x, y, [32, 32, 32]), epochs=2, verbose=0)
    np.testing.assert_allclose(history.history["loss"], expected.history["loss"], rtol=1e-5)
    for a, b in zip(_params(model), _params(reference)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_dataloader_as_data_matches_fit_on_one_device(two_devices):
    """ggrad's DataLoader (shuffled, Tensor batches, a short last batch of 8) as `data`, over two devices: the
    batches and the training of `fit` on one device over the same loader (the same shuffles: same seed)."""
    from ggrad.utils.data import DataLoader, TensorDataset
    x, y = _data(n=80)

    def run(fit):
        model = _model()
        loader = DataLoader(TensorDataset(ggrad.tensor(x), ggrad.tensor(y)), batch_size=24, shuffle=True)
        sizes = []

        class Sizes(Callback):
            def on_batch_end(self, batch, logs=None):
                sizes.append(logs["size"])
        history = fit(model, optim.SGD(model.parameters(), lr=0.1), loader, [Sizes()])
        return _params(model), history.history["loss"], sizes

    def on_one_device(model, opt, loader, callbacks):
        trainer = Trainer(model)
        trainer.compile(optimizer=opt, loss="cross_entropy")
        return trainer.fit(loader, epochs=2, callbacks=callbacks, verbose=0)

    params, losses, sizes = run(lambda model, opt, loader, callbacks: dp_train(
        model, opt, "cross_entropy", loader, two_devices, epochs=2, callbacks=callbacks, verbose=0))
    ref_params, ref_losses, ref_sizes = run(on_one_device)
    assert sizes == ref_sizes == [24, 24, 24, 8] * 2
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for a, b in zip(params, ref_params):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_weighted_uneven_batches_match_one_device(two_devices):
    """Shards 3:1, a last batch of one sample (one replica gets nothing), Tensor batches, max_steps."""
    x, y = _data(n=81)
    sizes = [32, 32, 16, 1]
    batches = [(ggrad.tensor(a), ggrad.tensor(b)) if i == 2 else (a, b) for i, (a, b) in enumerate(_batches(x, y, sizes))]
    model = _model()
    history = dp_train(model, optim.SGD(model.parameters(), lr=0.1), ggrad.cross_entropy, batches, two_devices,
                       epochs=3, max_steps=6, shard_weights=[3, 1], verbose=0)
    assert history.history["loss"][0] > history.history["loss"][1] and len(history.history["loss"]) == 2
    reference, losses = _model(), []
    opt = optim.SGD(reference.parameters(), lr=0.1)
    for xb, yb in (_batches(x, y, sizes) * 2)[:6]:
        loss = ggrad.cross_entropy(reference(ggrad.tensor(xb)), ggrad.tensor(yb))
        opt.zero_grad()
        loss.backward()
        opt.step()
    for a, b in zip(_params(model), _params(reference)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_replicas_stay_bitwise_identical_after_50_steps(two_devices):
    """AdamW, dropout, uneven shards, short batches, clipping and a changing learning rate: every replica
    gets the same bytes, so they stay identical bit for bit."""
    x, y = _data(n=64, seed=3)
    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Dropout(0.3), nn.Linear(16, 3))
    opt = optim.AdamW(model.parameters(), lr=1e-2)
    initial = _params(model)
    dp = DataParallel(model, two_devices, opt, shard_weights=[0.7, 0.3])
    try:
        for step in range(50):
            n = 3 + (step * 7) % 30
            opt.param_groups[0]["lr"] = 1e-2 / (1 + step)
            dp.step(x[:n], y[:n], ggrad.cross_entropy, max_grad_norm=0.5)
    finally:
        dp.close()
    assert dp.optimizers[1].param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    assert dp.optimizers[1].state[next(dp.replicas[1].parameters())]["step"] == 50
    assert all(r.training for r in dp.replicas)   # dropout was on
    moved = 0.0
    for a, b, p0 in zip(dp.replicas[0].parameters(), dp.replicas[1].parameters(), initial):
        assert a.device.name != b.device.name
        assert np.array_equal(a.numpy(), b.numpy())
        moved = max(moved, float(np.abs(a.numpy() - p0).max()))
    assert moved > 1e-3   # they trained


def test_a_failing_replica_ends_the_step_and_the_next_step_trains(two_devices):
    """An error while the second replica is recorded ends the step with no update anywhere (the replicas
    stay equal; the first one's recorded graph is never computed), and the next step trains as one."""
    x, y = _data(n=32)
    calls = []

    def loss_fn(out, target):
        calls.append(out.device.name)
        if len(calls) == 2:
            raise ValueError("loss of the second replica")
        return ggrad.cross_entropy(out, target)
    model = _model()
    before = _params(model)
    dp = DataParallel(model, two_devices, optim.SGD(model.parameters(), lr=0.1))
    try:
        with pytest.raises(ValueError, match="second replica"):
            dp.step(x, y, loss_fn)
        assert calls == [gg.device(d).name for d in two_devices]
        for p, q, b in zip(dp.replicas[0].parameters(), dp.replicas[1].parameters(), before):
            assert np.array_equal(p.numpy(), b) and np.array_equal(q.numpy(), b)
        loss = dp.step(x, y, loss_fn)
    finally:
        dp.close()
    reference, losses = _single_device_losses(x, y, steps=1)
    np.testing.assert_allclose(loss, losses[0], rtol=1e-5)
    for p, q, r in zip(dp.replicas[0].parameters(), dp.replicas[1].parameters(), reference.parameters()):
        assert np.array_equal(p.numpy(), q.numpy())
        np.testing.assert_allclose(p.numpy(), r.numpy(), rtol=1e-5, atol=1e-6)


def test_max_grad_norm_clips_the_averaged_gradient(two_devices):
    x, y = _data(n=40)
    model = _model()
    before = _params(model)
    dp_train(model, optim.SGD(model.parameters(), lr=1.0), ggrad.cross_entropy, [(x, y)], two_devices,
             max_grad_norm=1e-3, verbose=0)
    step = np.sqrt(sum(((a - b) ** 2).sum() for a, b in zip(_params(model), before)))
    assert 0 < step <= 1e-3 * 1.0001


def test_trained_model_state_moves_to_the_first_device(two_devices):
    """A model trained on the CPU with AdamW continues on devices that start with the RPC one."""
    x, y = _data(n=32)
    model = _model()
    opt = optim.AdamW(model.parameters(), lr=1e-2)
    dp_train(model, opt, ggrad.cross_entropy, [(x, y)], ["cpu"], verbose=0)
    history = dp_train(model, opt, ggrad.cross_entropy, [(x, y)] * 3, two_devices[::-1], verbose=0)
    assert next(model.parameters()).device.name == two_devices[1]
    first = next(model.parameters())
    assert opt.state[first]["step"] == 4 and opt.state[first]["exp_avg"].device.name == two_devices[1]
    assert np.isfinite(history.history["loss"][0])


def test_dp_train_bad_arguments(two_devices):
    model = _model()
    other = _model()
    with pytest.raises(ValueError, match="not one of the model's"):
        dp_train(model, optim.SGD(other.parameters(), lr=0.1), ggrad.cross_entropy, [], two_devices)
    with pytest.raises(ValueError, match="1 shard_weights for 2 devices"):
        dp_train(model, optim.SGD(model.parameters(), lr=0.1), ggrad.cross_entropy, [], two_devices,
                 shard_weights=[1])
    with pytest.raises(ValueError, match="not all 0"):
        DataParallel(model, two_devices, optim.SGD(model.parameters(), lr=0.1), shard_weights=[0, 0])
    with pytest.raises(TypeError, match="must be a Module"):
        dp_train(3, None, ggrad.cross_entropy, [])
    with pytest.raises(ValueError, match="no batches"):
        dp_train(model, optim.SGD(model.parameters(), lr=0.1), ggrad.cross_entropy, [], two_devices, verbose=0)
    with pytest.raises(ValueError, match="pair"):
        dp_train(model, optim.SGD(model.parameters(), lr=0.1), ggrad.cross_entropy, [np.zeros(6)], verbose=0)


def test_a_replica_computes_while_the_next_one_records(two_devices, monkeypatch):
    """The first device's graph is handed to its thread as soon as it is recorded: its compute begins
    while the second replica's loss is still being built (the loss function waits for it, up to 10 s)."""
    from ggrad.autograd import execution
    first = gg.device(two_devices[0])
    started = threading.Event()
    real = execution.realize

    def realize(device=None, eval_callback=None):
        if device is first:
            started.set()
        real(device, eval_callback)
    monkeypatch.setattr(execution, "realize", realize)
    seen = []

    def loss_fn(out, target):
        if out.device != first:
            seen.append(started.wait(10.0))
        return ggrad.cross_entropy(out, target)
    x, y = _data(n=32)
    dp = DataParallel(_model, two_devices, lambda p: optim.SGD(p, lr=0.1))
    try:
        dp.step(x, y, loss_fn)
    finally:
        dp.close()
    assert seen == [True]


def test_step_timings_are_consecutive_spans(two_devices):
    x, y = _data(n=32)
    dp = DataParallel(_model, two_devices, lambda p: optim.SGD(p, lr=0.1))
    try:
        t0 = time.perf_counter()
        dp.step(x, y, ggrad.cross_entropy)
        wall = time.perf_counter() - t0
    finally:
        dp.close()
    spans = [dp.timings[k] for k in ("record", "compute", "reduce", "update")]
    assert all(s >= 0 for s in spans) and spans[0] > 0 and spans[3] > 0
    assert abs(sum(spans) - dp.timings["step"]) < 1e-9
    assert dp.timings["step"] <= wall
