"""StepReplay: a step recorded once, then computed again with new input values only."""

import numpy as np
import pytest

import ggrad
from ggrad.autograd.ops.inplace import index_write_
from ggrad.autograd.step_replay import StepReplay
from ggrad.nn import functional as F


def test_replays_give_what_recording_the_step_gives():
    w = ggrad.tensor(np.arange(12, dtype=np.float32).reshape(3, 4)).realize()
    replay = StepReplay(lambda x, i: ((x @ w).relu().sum(-1), w[i].sum()), "cpu")
    rng = np.random.default_rng(0)
    before = ggrad.stats()["step_replays"]
    for step in range(5):
        x = rng.standard_normal((2, 3)).astype(np.float32)
        i = np.array([step % 3], dtype=np.int32)
        total, row = replay(x, i)
        np.testing.assert_allclose(total, np.maximum(x @ w.numpy(), 0).sum(-1), rtol=1e-6)
        np.testing.assert_allclose(row, w.numpy()[step % 3].sum())
    assert replay.records == 1 and ggrad.stats()["step_replays"] - before == 4


def test_persistent_writes_happen_at_every_replay_at_the_input_slot():
    buffer = ggrad.zeros(6, 2).realize()

    def write(slot, value):
        with ggrad.no_grad():
            return index_write_(buffer, 0, slot, value).sum()

    replay = StepReplay(write, "cpu")
    for slot in range(6):
        assert replay(np.array([slot], np.int32), np.full((1, 2), slot + 1.0, np.float32)) == pytest.approx(
            sum(2.0 * (s + 1) for s in range(slot + 1)))
    np.testing.assert_array_equal(buffer.numpy()[:, 0], np.arange(1, 7))
    assert replay.records == 1


def test_other_computes_between_calls_do_not_record_the_step_again():
    """The step keeps its own compute buffer (owned_graph.py): another graph computed between two calls
    lays out the device's scheduler, not the step's."""
    replay = StepReplay(lambda x: x * 2.0, "cpu")
    np.testing.assert_array_equal(replay(np.ones(3, np.float32)), 2.0)
    other = ggrad.ones(100) + 1
    np.testing.assert_array_equal(other.numpy(), 2.0)
    np.testing.assert_array_equal(replay(np.full(3, 4.0, np.float32)), 8.0)
    big = ggrad.arange(1000, dtype=ggrad.float32) * 3.0
    np.testing.assert_array_equal(big.numpy(), np.arange(1000, dtype=np.float32) * 3.0)
    np.testing.assert_array_equal(replay(np.full(3, 5.0, np.float32)), 10.0)
    np.testing.assert_array_equal(other.numpy(), 2.0)   # results of other graphs are not overwritten
    np.testing.assert_array_equal(big.numpy(), np.arange(1000, dtype=np.float32) * 3.0)
    assert replay.records == 1
    np.testing.assert_array_equal(replay(np.ones(4, np.float32)), 2.0)   # another shape: recorded
    assert replay.records == 2


def test_inputs_written_in_place_replay_as_a_call_with_them():
    """in_place's views are the memory the graph reads and writes: replay() after writing there gives what
    calling with the same values gives, and an index out of range is refused before anything is computed."""
    w = ggrad.tensor(np.arange(12, dtype=np.float32).reshape(4, 3)).realize()
    replay = StepReplay(lambda x, i: (x * 2.0 + F.embedding(i, w).sum(), i + 1), "cpu")
    assert replay.in_place() is None   # nothing recorded yet
    replay(np.ones(3, np.float32), np.array([0], np.int32))
    (x, i), (scaled, shifted) = replay.in_place()
    for row in range(4):
        x[...] = np.arange(3, dtype=np.float32) + row
        i[0] = row
        replay.replay()
        expected = replay(np.arange(3, dtype=np.float32) + row, np.array([row], np.int32))
        np.testing.assert_array_equal(scaled, (np.arange(3) + row) * 2.0 + w.numpy()[row].sum())
        np.testing.assert_array_equal(scaled, expected[0])
        np.testing.assert_array_equal(shifted, [row + 1])
    i[0] = 4
    with pytest.raises(IndexError, match="input 1 indexes a dimension of size 4, got the index 4"):
        replay.replay()
    np.testing.assert_array_equal(shifted, [4])   # not computed
    i[0] = -1
    with pytest.raises(IndexError, match="got the index -1"):
        replay.replay()
    assert replay.records == 1


def test_replay_buffer_is_freed_with_the_step():
    import gc
    import weakref
    replay = StepReplay(lambda x: x * 2.0, "cpu")
    replay(np.ones(3, np.float32))
    replay(np.ones(3, np.float32))
    size = replay._replay.buffer_bytes()
    held = ggrad.stats()["memory"]["CPU"]["replay_buffers"]   # with the steps other tests' models hold
    assert size > 0 and held >= size
    owned = weakref.ref(replay._replay)
    del replay
    gc.collect()
    assert owned() is None
    assert ggrad.stats()["memory"]["CPU"]["replay_buffers"] <= held - size


def test_index_write_takes_a_tensor_index_checked_as_index_select():
    target = ggrad.zeros(2, 5, 3).realize()
    with ggrad.no_grad():
        out = index_write_(target, 1, ggrad.tensor(np.array([3, 0], np.int32)), ggrad.ones(2, 2, 3))
        np.testing.assert_array_equal(out.numpy()[0, :, 0], [1, 0, 0, 1, 0])
        with pytest.raises(IndexError, match="out of bounds for dimension 1 with size 5"):
            index_write_(target, 1, ggrad.tensor(np.array([5], np.int32)), ggrad.ones(2, 1, 3))
        with pytest.raises(TypeError, match="must be 1-D"):
            index_write_(target, 1, ggrad.tensor(np.array([[1]], np.int32)), ggrad.ones(2, 1, 3))


def test_one_checked_slot_serves_every_write_of_a_replayed_step():
    keys, values = ggrad.zeros(4, 2).realize(), ggrad.zeros(4, 2).realize()

    def write(slot, value):
        with ggrad.no_grad():
            return index_write_(keys, 0, slot, value).sum() + index_write_(values, 0, slot, value * 2.0).sum()

    replay = StepReplay(write, "cpu")
    for slot in (2, 0, 3):
        replay(np.array([slot], np.int32), np.full((1, 2), slot + 1.0, np.float32))
    np.testing.assert_array_equal(keys.numpy()[:, 0], [1, 0, 3, 4])
    np.testing.assert_array_equal(values.numpy()[:, 0], [2, 0, 6, 8])


def test_profile_sees_the_replayed_computes():
    replay = StepReplay(lambda x: (x * 3.0).relu(), "cpu")
    replay(np.ones(4, np.float32))
    with ggrad.profile() as prof:
        for _ in range(3):
            replay(np.ones(4, np.float32))
    assert replay.records == 1
    assert sum(calls for calls, _ in prof.by_op().values()) >= 3


def test_index_inputs_are_checked_on_the_host_at_every_call():
    weight = ggrad.tensor(np.arange(10, dtype=np.float32).reshape(5, 2)).realize()
    buffer = ggrad.zeros(4, 2).realize()

    def step(ids, slot):
        with ggrad.no_grad():
            rows = ggrad.embedding(ids, weight)
            return index_write_(buffer, 0, slot, rows).sum()

    replay = StepReplay(step, "cpu")
    assert replay(np.array([4], np.int32), np.array([1], np.int32)) == pytest.approx(17.0)
    with pytest.raises(IndexError, match="input 0 indexes a dimension of size 5, got the index 5"):
        replay(np.array([5], np.int32), np.array([2], np.int32))
    with pytest.raises(IndexError, match="input 1 indexes a dimension of size 4, got the index -1"):
        replay(np.array([0], np.int32), np.array([-1], np.int32))
    np.testing.assert_array_equal(buffer.numpy()[:, 0], [0, 8, 0, 0])   # nothing computed by the two calls
    assert replay(np.array([2], np.int32), np.array([3], np.int32)) == pytest.approx(17.0 + 9.0)
    assert replay.records == 1


def test_a_bad_index_while_recording_raises_after_a_clamped_compute():
    weight = ggrad.tensor(np.arange(6, dtype=np.float32).reshape(3, 2)).realize()
    replay = StepReplay(lambda ids: ggrad.embedding(ids, weight).sum(), "cpu")
    with pytest.raises(IndexError, match="size 3, got the index 7"):
        replay(np.array([0, 7], np.int32))
    assert replay(np.array([2, 1], np.int32)) == pytest.approx(4 + 5 + 2 + 3)
    assert replay.records == 1   # the failed recording is not kept
