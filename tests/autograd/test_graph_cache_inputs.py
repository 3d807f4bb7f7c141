"""The graph cache keys computed inputs by position and layout: a step fed other computed tensors of the
same dtypes and shapes (held results of an earlier compute) replays the cached graph on their memory."""

import numpy as np

import ggrad


def _two_graph_steps(cached, steps=5):
    """Each step computes a fresh `h`, then a second graph reads it directly and through views."""
    ggrad.set_graph_cache(cached)
    try:
        w = ggrad.tensor(np.arange(12, dtype=np.float32).reshape(4, 3) / 10)
        ggrad.realize()
        ggrad.reset_stats()
        out = []
        for i in range(steps):
            h = ggrad.tensor(np.full((3, 4), i + 1.0, np.float32)) * ggrad.arange(4.0)
            h.numpy()   # h is now a computed tensor in fresh memory
            y = h.t() @ h[:, :3] + h[1:, 1:].sum() + (h @ w).sum(0)
            out.append(y.numpy())
        return out, ggrad.stats()
    finally:
        ggrad.set_graph_cache(True)


def _expected(i):
    h = np.full((3, 4), i + 1.0, np.float32) * np.arange(4, dtype=np.float32)
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    return h.T @ h[:, :3] + h[1:, 1:].sum() + (h @ w).sum(0)


def test_fresh_computed_inputs_and_their_views_replay_with_their_own_values():
    plain, (cached, stats) = _two_graph_steps(False)[0], _two_graph_steps(True)
    for i, (a, b) in enumerate(zip(plain, cached)):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(b, _expected(i), rtol=1e-6)
    assert stats["cache_hits"] >= 6 and stats["cache_misses"] <= 4   # 10 computes: two per step


def test_a_computed_input_of_another_shape_misses_and_stays_correct():
    ggrad.manual_seed(0)
    got = []
    for n in (3, 3, 5, 3):
        h = ggrad.ones(n, 2) * 2.0
        h.numpy()
        got.append((h.t() @ h).numpy())
    for n, g in zip((3, 3, 5, 3), got):
        np.testing.assert_array_equal(g, np.full((2, 2), 4.0 * n, np.float32))
