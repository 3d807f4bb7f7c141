"""The backward replay (backward_replay.py): a repeated `loss.backward()` over a replayed trace takes the
recorded pass, bitwise as the pass run as written, and runs as written wherever the graph, the leaves or
the hooks differ from what was recorded."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
from ggrad import optim


class Net(nn.Module):
    def __init__(self, d=12, classes=5):
        super().__init__()
        self.block = nn.TransformerBlock(d, 2, activation="gelu_tanh")
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        return self.head(self.block(x))


def _train(cached, steps, before_step=None, seed=0, autocast=None):
    """Train a Net for `steps` steps with the graph cache on or off; `before_step(i, model, x)` may change
    the step (it returns the input to use); `autocast` a half dtype to train under. The losses,
    parameters, gradients and counters."""
    ggrad.set_graph_cache(cached)
    try:
        ggrad.manual_seed(seed)
        model = Net()
        opt = optim.AdamW(model.parameters(), lr=1e-2)
        rng = np.random.default_rng(seed)
        ggrad.realize()
        ggrad.reset_stats()
        losses = []
        for i in range(steps):
            x = ggrad.tensor(rng.standard_normal((2, 6, 12)).astype(np.float32))
            y = ggrad.tensor(rng.integers(0, 5, (12,)))
            if before_step is not None:
                x = before_step(i, model, x)
            with ggrad.autocast("cpu", dtype=autocast or ggrad.bfloat16, enabled=autocast is not None):
                loss = ggrad.cross_entropy(model(x).reshape(-1, 5), y)
            opt.zero_grad()
            loss.backward()
            grads = [None if p.grad is None else p.grad.numpy() for p in model.parameters()]
            opt.step()
            losses.append(loss.item())
        return losses, [p.numpy() for p in model.parameters()], grads, ggrad.stats()
    finally:
        ggrad.set_graph_cache(True)


def _assert_same(a, b):
    assert a[0] == b[0]
    for pa, pb in zip(a[1], b[1]):
        np.testing.assert_array_equal(pa, pb)
    for ga, gb in zip(a[2], b[2]):
        assert (ga is None) == (gb is None)
        if ga is not None:
            np.testing.assert_array_equal(ga, gb)


def test_repeated_backward_passes_replay_bitwise():
    cached, uncached = _train(True, 6), _train(False, 6)
    _assert_same(cached, uncached)
    assert cached[3]["backward_replays"] >= 3 and uncached[3]["backward_replays"] == 0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_autocast_steps_replay_their_backward_bitwise(dtype):
    """Autocast keeps half tensors for backward through ggrad's own saved-tensor packing: still replayed."""
    cached = _train(True, 5, autocast=getattr(ggrad, dtype))
    _assert_same(cached, _train(False, 5, autocast=getattr(ggrad, dtype)))
    assert cached[3]["backward_replays"] >= 2


def test_saved_tensors_hooks_of_the_user_run_in_every_pass():
    unpacked = []
    ggrad.manual_seed(0)
    model = Net()
    for i in range(5):
        x = ggrad.tensor(np.full((2, 6, 12), 0.5, dtype=np.float32))
        with ggrad.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t, i=i: unpacked.append(i) or t):
            loss = model(x).sum()
        loss.backward()
        for p in model.parameters():
            p.grad = None
        ggrad.realize()
    assert sorted(set(unpacked)) == [0, 1, 2, 3, 4]


def test_a_frozen_parameter_gets_no_gradient_in_the_step_it_is_frozen():
    def freeze_late(i, model, x):
        model.head.weight.requires_grad_(i < 4)
        return x
    cached = _train(True, 6, freeze_late)
    _assert_same(cached, _train(False, 6, freeze_late))
    assert cached[2][-2] is None   # head.weight


def test_an_input_that_requires_grad_in_some_steps_runs_the_pass_as_written():
    def vary(i, model, x):   # the same forward ops, one more leaf to the autograd graph
        return x.requires_grad_(True) if i % 2 else x
    _assert_same(_train(True, 6, vary), _train(False, 6, vary))


def test_tensor_and_leaf_hooks_and_retain_grad_see_their_gradients():
    seen = []

    def hook_late(i, model, x):
        if i == 4:
            model.head.bias.register_hook(lambda g: seen.append(g.numpy()))
        if i == 5:
            x = x.requires_grad_(True) * 1.0
            x.retain_grad()
            seen.append(x)
        return x
    def values():   # the hook's gradients in steps 4 and 5, and the gradient retained in step 5
        assert len(seen) == 3 and seen[1].grad is not None
        return [seen[0], seen[2], seen[1].grad.numpy()]
    cached = _train(True, 6, hook_late)
    cached_seen = values()
    seen.clear()
    _assert_same(cached, _train(False, 6, hook_late))
    for a, b in zip(cached_seen, values()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kind", ["hook", "retain_grad"])
def test_a_hook_or_retain_grad_on_an_intermediate_tensor_runs_the_pass_as_written(kind):
    """Neither adds an op to the forward (the trace replays to the backward): the replay must see them."""
    ggrad.manual_seed(0)
    model = Net()
    seen = []
    for i in range(5):
        h = model.block(ggrad.tensor(np.full((2, 6, 12), 0.5, dtype=np.float32)))
        if i == 4 and kind == "hook":
            h.register_hook(lambda g: seen.append(g.numpy()))
        if i == 4 and kind == "retain_grad":
            h.retain_grad()
        model.head(h).sum().backward()
        for p in model.parameters():
            p.grad = None
        ggrad.realize()
    assert ggrad.stats()["backward_replays"] >= 1
    got = seen[0] if kind == "hook" else h.grad.numpy()
    want = np.broadcast_to(model.head.weight.numpy().sum(0), (2, 6, 12))   # d sum(h W^T + b) / dh
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_detach_between_modules_in_some_steps_cuts_their_gradients():
    """detach adds no op: the steps replay the same forward, and only the graph behind the loss differs."""
    ggrad.manual_seed(0)
    model = Net()
    for i in range(6):
        h = model.block(ggrad.tensor(np.full((2, 6, 12), 0.5, dtype=np.float32)))
        model.head(h.detach() if i % 3 == 2 else h).sum().backward()
        cut = [p.grad is None for p in model.block.parameters()]
        assert all(cut) if i % 3 == 2 else not any(cut)
        assert model.head.weight.grad is not None
        for p in model.parameters():
            p.grad = None
        ggrad.realize()
    assert ggrad.stats()["backward_replays"] >= 2


def test_an_in_place_change_of_a_saved_tensor_still_raises():
    ggrad.manual_seed(0)
    model = Net()
    errors = []
    for i in range(4):
        x = ggrad.tensor(np.ones((2, 6, 12), dtype=np.float32))
        h = model.block(x)
        out = nn.functional.gelu(h).sum()
        if i == 3:
            h.add_(1.0)   # gelu saved h: its gradient would read the changed values
        try:
            out.backward()
        except RuntimeError as e:
            errors.append(str(e))
        for p in model.parameters():
            p.grad = None
        ggrad.realize()
    assert len(errors) == 1 and "modified by an inplace operation" in errors[0]


def test_a_second_backward_over_a_replayed_pass_raises_as_freed():
    ggrad.manual_seed(0)
    model = Net()
    for i in range(4):
        loss = model(ggrad.tensor(np.ones((2, 6, 12), dtype=np.float32))).sum()
        loss.backward()
        for p in model.parameters():
            p.grad = None
        ggrad.realize()
    assert ggrad.stats()["backward_replays"] >= 1
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_gradients_that_accumulate_run_the_pass_as_written():
    # zero_grad(set_to_none=False) keeps the .grad tensors: each pass adds into them
    def run(cached):
        ggrad.set_graph_cache(cached)
        try:
            ggrad.manual_seed(0)
            model = Net()
            ggrad.reset_stats()
            for i in range(4):
                model(ggrad.tensor(np.full((2, 6, 12), i, dtype=np.float32))).sum().backward()
                ggrad.realize()
            return [p.grad.numpy() for p in model.parameters()], ggrad.stats()["backward_replays"]
        finally:
            ggrad.set_graph_cache(True)
    (cached, replays), (uncached, _) = run(True), run(False)
    assert replays == 0
    for a, b in zip(cached, uncached):
        np.testing.assert_array_equal(a, b)


def test_a_loader_thread_making_device_tensors_during_the_steps_changes_nothing():
    """A recorded pass holds its device's lock: another thread's new tensors never land among its events."""
    import threading
    stop = threading.Event()
    made = []

    def loader():
        rng = np.random.default_rng(1)
        while not stop.is_set():
            made.append(ggrad.tensor(rng.standard_normal((2, 6, 12)).astype(np.float32)))
            del made[:-4]

    thread = threading.Thread(target=loader)
    thread.start()
    try:
        cached = _train(True, 8)
    finally:
        stop.set()
        thread.join()
    _assert_same(cached, _train(False, 8))
