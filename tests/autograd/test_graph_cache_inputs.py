"""The graph cache keys computed inputs by position and layout: a step fed other computed tensors of the
same dtypes and shapes (held results of an earlier compute) replays the cached graph on their memory."""

import numpy as np

import ggrad
from ggrad.autograd import memory


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


def _adamw_steps(cached, swap_at=None, steps=5):
    """A linear model trained by AdamW on fixed host data; at step `swap_at` its weight is replaced by a new
    Parameter of the same shape. (losses, weights after each step)."""
    ggrad.set_graph_cache(cached)
    try:
        ggrad.manual_seed(0)
        model = ggrad.nn.Linear(4, 3)
        opt = ggrad.optim.AdamW(model.parameters(), lr=0.1)
        x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
        losses, weights = [], []
        for i in range(steps):
            if i == swap_at:
                model.weight = ggrad.nn.Parameter(ggrad.full((3, 4), 0.25))
                opt = ggrad.optim.AdamW(model.parameters(), lr=0.1)
            loss = model(ggrad.tensor(x)).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            weights.append(model.weight.numpy().copy())
        return losses, weights
    finally:
        ggrad.set_graph_cache(True)


def test_parameters_and_optimizer_moments_enter_the_cached_graph_as_themselves():
    """State that is the same every step (Parameters, AdamW's moments, updated in place) needs no stand-in
    to be pointed at its memory on every replay: the one stand-in of the replayed step is the input batch's
    (a computed tensor that another step may replace by one of its layout)."""
    ggrad.manual_seed(0)
    model = ggrad.nn.Sequential(ggrad.nn.Linear(4, 8), ggrad.nn.Tanh(), ggrad.nn.Linear(8, 2))
    opt = ggrad.optim.AdamW(model.parameters(), lr=0.1)
    x = ggrad.tensor(np.ones((3, 4), np.float32))
    for _ in range(4):
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    entry = memory.runtime(x.device).cache[0]
    assert entry.layouts == [(x.dtype, x.shape)]
    assert ggrad.stats()["cache_hits"] >= 2


def test_a_parameter_replaced_between_steps_misses_and_trains_the_new_one():
    """Keyed by identity, a new Parameter object in the old one's place is another graph: the step is
    rebuilt on it (not replayed on the old weight's memory), bitwise as the uncached path."""
    plain, cached = _adamw_steps(False, swap_at=3), _adamw_steps(True, swap_at=3)
    assert plain[0] == cached[0]
    for a, b in zip(plain[1], cached[1]):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(cached[1][3], plain[1][2])


def test_a_parameter_and_its_detached_alias_are_one_node_of_the_step():
    """A Parameter read through a detached alias (a plain Tensor over the same memory) and updated in place
    in the same step: every read sees the memory before the update, as without the cache."""
    def run(cached):
        ggrad.set_graph_cache(cached)
        try:
            w = ggrad.nn.Parameter(ggrad.tensor(np.arange(4, dtype=np.float32)))
            w.numpy()
            out = []
            for _ in range(4):
                a = w.detach() * 3.0
                b = (w * 2.0).sum()
                with ggrad.no_grad():
                    w.add_(1.0)
                out.append((a.numpy().copy(), b.item(), w.numpy().copy()))
            return out
        finally:
            ggrad.set_graph_cache(True)
    plain, cached = run(False), run(True)
    for i, ((a0, b0, w0), (a1, b1, w1)) in enumerate(zip(plain, cached)):
        np.testing.assert_array_equal(a0, a1)
        assert b0 == b1
        np.testing.assert_array_equal(w0, w1)
        np.testing.assert_array_equal(a1, (np.arange(4) + i) * 3.0)


def test_a_relabelled_input_does_not_replay_a_graph_built_for_another_storage_type():
    """A Tensor's dtype may label storage of another GGML type (GetRows' integer rows are float32-labelled
    int32): a cached graph whose stand-in was a float32 tensor of the same shape must not read it."""
    from ggrad import ggml
    from ggrad.autograd.ops.convert import relabel
    from ggrad.autograd.ops.unary import Cast
    real = ggrad.tensor(np.array([9.5, 2.5, 9.5], np.float32)) * 1.0
    real.numpy()
    for _ in range(2):   # a cached Cast of a computed float32 input of shape (3,)
        np.testing.assert_array_equal(Cast.apply(real, ggml.i32).numpy(), [9, 2, 9])
    ints = ggrad.tensor(np.array([7, 2, 5], np.int32)) + 0
    ints.numpy()
    labelled = relabel(ints, ggml.f32)
    np.testing.assert_array_equal(Cast.apply(labelled, ggml.i32).numpy(), [7, 2, 5])
