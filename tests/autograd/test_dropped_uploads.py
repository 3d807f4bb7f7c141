"""Host data whose Tensor was dropped before any compute, and that no pending node reads, is neither kept
nor uploaded; host data that is held, read by the graph, viewed or aliased still is."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
from ggrad import optim
from ggrad.autograd import execution, recording

pytestmark = pytest.mark.skipif(execution.EAGER, reason="GGRAD_EAGER=1 uploads each leaf as it is made")

ROW = 1024                 # f32 values per row: 4 KiB
BATCH = 256                # rows per batch: 1 MiB


@pytest.fixture(params=[True, False], ids=["cache", "nocache"])
def graph_cache(request):
    ggrad.set_graph_cache(request.param)
    yield request.param
    ggrad.set_graph_cache(True)


def _data(rows=4096):
    """A computed [rows, ROW] f32 tensor, so that x[idx] gathers on the host without uploading it again."""
    values = np.random.default_rng(0).standard_normal((rows, ROW)).astype(np.float32)
    return values, ggrad.tensor(values).realize()


def _uploaded(fn):
    """Bytes uploaded by the computes of `fn()`, and its result."""
    ggrad.realize()
    before = ggrad.stats()["bytes_uploaded"]
    out = fn()
    return ggrad.stats()["bytes_uploaded"] - before, out


def test_dropped_leaves_are_not_uploaded(graph_cache):
    def run():
        for _ in range(5):
            ggrad.tensor(np.ones((64, ROW), np.float32))   # dropped at once, read by nothing
        held = ggrad.tensor(np.full((8, ROW), 3.0, np.float32))
        return held.numpy()

    uploaded, values = _uploaded(run)
    assert uploaded == 8 * ROW * 4
    np.testing.assert_array_equal(values, 3.0)


def test_held_leaves_and_leaves_the_graph_reads_are_uploaded(graph_cache):
    def run():
        held = ggrad.tensor(np.full(ROW, 2.0, np.float32))
        read = ggrad.tensor(np.arange(ROW, dtype=np.float32))
        doubled = read * 2.0
        del read                                            # dropped, but `doubled` reads it
        ggrad.tensor(np.ones(ROW, np.float32))              # dropped and unread
        return held.numpy(), doubled.numpy()

    uploaded, (held, doubled) = _uploaded(run)
    assert uploaded == 2 * ROW * 4
    np.testing.assert_array_equal(held, 2.0)
    np.testing.assert_array_equal(doubled, 2.0 * np.arange(ROW))


def test_a_loop_of_dropped_batches_stays_bounded(rss_bytes):
    values, data = _data()
    idx = ggrad.tensor(np.arange(BATCH) * 7)
    data[idx].numpy()   # warm: the gather and a compute of one batch
    start = rss_bytes()
    for _ in range(400):   # 400 MiB of batches
        batch = data[idx]
    grown = rss_bytes() - start
    ggrad.reset_stats()
    last = batch.numpy()
    after_compute = rss_bytes() - start
    assert grown < 150 << 20, f"RSS grew by {grown >> 20} MiB making 400 MiB of dropped batches"
    assert after_compute < 150 << 20, f"RSS grew by {after_compute >> 20} MiB after the compute"
    assert ggrad.stats()["bytes_uploaded"] == BATCH * ROW * 4
    np.testing.assert_array_equal(last, values[np.arange(BATCH) * 7])


def test_dropped_leaves_that_are_viewed_read_or_aliased_survive_the_pruning(graph_cache):
    """Making 80 MiB of dropped batches prunes the pending uploads; a dropped leaf that a view, a pending
    node or a detached alias still reads is kept and uploaded."""
    values, data = _data(2048)
    base = np.arange(4 * ROW, dtype=np.float32).reshape(4, ROW)
    viewed = ggrad.tensor(base)
    row = viewed[1:3]
    read = ggrad.tensor(base + 1.0)
    total = read.sum()
    aliased = ggrad.tensor(base + 2.0)
    alias = recording.alias(aliased)   # a Tensor of the same node that does not hold the first (`.to()` across devices)
    detached = ggrad.tensor(base + 3.0)
    held = detached.detach()
    del viewed, read, aliased, detached
    idx = ggrad.tensor(np.arange(BATCH))
    for _ in range(80):
        data[idx]
    np.testing.assert_array_equal(row.numpy(), base[1:3])
    assert total.item() == pytest.approx(float((base + 1.0).sum()), rel=1e-6)
    np.testing.assert_array_equal(alias.numpy(), base + 2.0)
    np.testing.assert_array_equal(held.numpy(), base + 3.0)


def _train(xs, extra):
    """Losses and bytes uploaded per step of a small model trained on the batches `xs`; each step makes
    its batch (dropped after the forward, still read by the graph) and, with `extra`, an unused one."""
    ggrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
    opt = optim.AdamW(model.parameters(), lr=1e-2)

    def step(x):
        if extra:
            ggrad.tensor(np.zeros((512, 64), np.float32))   # an unused batch, dropped
        loss = model(ggrad.tensor(x)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    losses, uploads = [], []
    for x in xs:
        uploaded, loss = _uploaded(lambda: step(x))
        losses.append(loss)
        uploads.append(uploaded)
    return losses, uploads


def test_a_cached_training_step_with_fresh_batches_hits_and_skips_dropped_ones(graph_cache):
    xs = np.random.default_rng(1).standard_normal((6, 32, 64)).astype(np.float32)
    ggrad.realize()
    before = ggrad.stats()
    losses, uploads = _train(xs, extra=True)
    after = ggrad.stats()
    if graph_cache:
        assert after["cache_hits"] - before["cache_hits"] >= 4
        assert after["cache_misses"] - before["cache_misses"] <= 2
    assert all(u < 512 * 64 * 4 for u in uploads[2:]), uploads   # the batch and hyperparameters only
    again, _ = _train(xs, extra=False)
    np.testing.assert_allclose(losses, again, rtol=1e-5)
