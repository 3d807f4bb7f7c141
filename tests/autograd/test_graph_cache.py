"""The graph cache (trace_cache.py): a repeated step reuses its graph, and results are bitwise those of
the uncached path, also when shapes, control flow, held results or hyper-parameters change."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
from ggrad import optim


class TinyLM(nn.Module):
    def __init__(self, vocab=11, d=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.block = nn.TransformerBlock(d, 2)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids, variant=0):
        x = self.block(self.embed(ids))
        if variant == 1:      # data-dependent Python control flow: another op sequence
            x = x.tanh()
        elif variant == 2:
            x = x * 0.5 + x.relu()
        return self.head(x)


def _train(cached, batches, variants=None, lrs=None, hold=False):
    """Train a TinyLM on `batches`; the losses, final parameters and cache counters."""
    ggrad.set_graph_cache(cached)
    try:
        ggrad.manual_seed(0)
        model = TinyLM()
        opt = optim.AdamW(model.parameters(), lr=1e-2)
        ggrad.realize()
        ggrad.reset_stats()
        losses, held = [], []
        for i, ids in enumerate(batches):
            if lrs is not None:
                opt.param_groups[0]["lr"] = lrs[i]
            x = ggrad.tensor(ids)
            variant = 0 if variants is None else variants(i, losses)
            logits = model(x, variant)
            loss = ggrad.cross_entropy(logits.reshape(-1, 11), x.reshape(-1))
            if hold and i % 2:
                held.append(logits)       # another set of held results than the other steps
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        params = [p.numpy() for p in model.parameters()]
        return losses, params, [h.numpy() for h in held], ggrad.stats()
    finally:
        ggrad.set_graph_cache(True)


def _batches(n, shape=(3, 7), seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 11, shape) for _ in range(n)]


def _assert_same(a, b):
    assert a[0] == b[0]   # bitwise-equal losses
    for pa, pb in zip(a[1], b[1]):
        np.testing.assert_array_equal(pa, pb)
    for ha, hb in zip(a[2], b[2]):
        np.testing.assert_array_equal(ha, hb)


def test_repeated_steps_hit_the_cache_and_match_the_uncached_path_bitwise():
    batches = _batches(6)
    plain, cached = _train(False, batches), _train(True, batches)
    _assert_same(plain, cached)
    assert plain[3]["cache_hits"] == 0
    assert cached[3]["cache_hits"] >= 4 and cached[3]["cache_misses"] <= 2


def test_a_shape_change_mid_run_misses_and_stays_correct():
    batches = _batches(3) + _batches(2, shape=(2, 5), seed=1) + _batches(3, seed=2)
    plain, cached = _train(False, batches), _train(True, batches)
    _assert_same(plain, cached)
    assert cached[3]["cache_misses"] >= 2    # the new shape, then the old one whose entry it may evict
    assert cached[3]["cache_hits"] >= 3


@pytest.mark.parametrize("rule", [
    lambda i, losses: i % 3,                                    # alternating op sequences
    lambda i, losses: 1 if losses and losses[-1] > 2.3 else 2,  # a branch on a computed value
])
def test_data_dependent_control_flow_stays_correct(rule):
    batches = _batches(7)
    _assert_same(_train(False, batches, rule), _train(True, batches, rule))


def test_other_held_results_and_changing_hyperparameters_stay_correct():
    batches = _batches(6)
    lrs = [1e-2, 1e-2, 5e-3, 5e-3, 1e-3, 1e-3]
    plain, cached = _train(False, batches, lrs=lrs, hold=True), _train(True, batches, lrs=lrs, hold=True)
    _assert_same(plain, cached)
    assert len(plain[2]) == 3


def test_an_in_place_change_of_a_parameter_between_steps_is_seen():
    ggrad.manual_seed(0)
    lin = nn.Linear(4, 3)
    x = ggrad.tensor(np.ones((2, 4), np.float32))
    outs = []
    for i in range(4):
        if i == 2:
            with ggrad.no_grad():
                lin.weight.copy_(ggrad.zeros((3, 4)))
        outs.append(lin(x).numpy())
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[2], np.broadcast_to(lin.bias.numpy(), (2, 3)), rtol=0, atol=0)
    np.testing.assert_array_equal(outs[2], outs[3])


def test_a_step_that_reads_a_value_midway_computes_twice_and_matches():
    def run(cached):
        ggrad.set_graph_cache(cached)
        try:
            ggrad.manual_seed(0)
            lin = nn.Linear(5, 5)
            out = []
            for i in range(4):
                h = lin(ggrad.tensor(np.full((2, 5), float(i), np.float32)))
                scale = h.sum().item()   # a compute in the middle of the step
                out.append((h * scale).sum().item())
            return out
        finally:
            ggrad.set_graph_cache(True)
    assert run(False) == run(True)


def test_python_numbers_in_the_trace_are_compared_exactly():
    lin = nn.Linear(3, 3)
    x = ggrad.tensor(np.ones((1, 3), np.float32))
    scales = [0.5, 0.5, 0.25, -0.0, 0.0, 2, 2.0]
    got = [(lin(x) * s).numpy() for s in scales]
    base = lin(x).numpy()
    for s, g in zip(scales, got):
        np.testing.assert_array_equal(g, base * np.float32(s))
        np.testing.assert_array_equal(np.signbit(g), np.signbit(base * np.float32(s)))


def _addresses(graph):
    """Per node of a GGML graph: the memory it writes and the memory of its operands."""
    from ggrad.ggml._lib import ffi, lib
    g = graph.ptr

    def address(t):
        return 0 if t == ffi.NULL else int(ffi.cast("uintptr_t", t.data))
    nodes = (lib.ggml_graph_node(g, i) for i in range(lib.ggml_graph_n_nodes(g)))
    return [(address(n), tuple(address(n.src[j]) for j in range(4))) for n in nodes]


def test_a_replayed_step_computes_at_the_same_addresses(monkeypatch):
    """A replayed graph reads and writes the same addresses each step, which GGML's CUDA graphs need to
    replay their capture: held results are placed by the entry's plan in the compute buffer, and results
    held across steps (gradients a loop keeps) are moved out of it before the next compute, with their
    values."""
    from ggrad.ggml import sched
    seen = []
    compute = sched.Scheduler.compute

    def recording(self, graph, eval_callback=None):
        seen.append(_addresses(graph))
        return compute(self, graph, eval_callback)
    monkeypatch.setattr(sched.Scheduler, "compute", recording)
    ggrad.manual_seed(0)
    model = TinyLM()
    opt = optim.AdamW(model.parameters(), lr=1e-2)
    kept, values = [], []
    for i, ids in enumerate(_batches(7)):
        x = ggrad.tensor(ids)
        loss = ggrad.cross_entropy(model(x).reshape(-1, 11), x.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        if i == 5:
            kept = [p.grad for p in model.parameters()]
            values = [g.numpy().copy() for g in kept]
    assert seen[2] == seen[3] == seen[4] == seen[5] == seen[6]
    assert ggrad.stats()["cache_hits"] >= 5
    last = [p.grad.numpy() for p in model.parameters()]
    for grad, value, new in zip(kept, values, last):
        np.testing.assert_array_equal(grad.numpy(), value)
        assert grad.numel() == 1 or not np.array_equal(value, new)


def _linear_steps(steps, keep_grads):
    """Steps of a linear model on fixed data; the weight's gradient of every step (as held, when
    `keep_grads`, else only its GGML node) and its values."""
    ggrad.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = optim.SGD(model.parameters(), lr=0.5)
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 6
    kept, nodes, values = [], [], []
    for _ in range(steps):
        opt.zero_grad()
        model(ggrad.tensor(x)).square().sum().backward()
        opt.step()
        grad = model.weight.grad
        nodes.append(grad._node)
        values.append(grad.numpy().copy())
        if keep_grads:
            kept.append(grad)
        del grad
    return kept, nodes, values


def test_a_replayed_step_re_homes_its_results_onto_the_metadata_nobody_uses_any_more():
    """Once last step's gradient is gone, its metadata (pointing at the memory the replay writes again) is
    this step's gradient's: no new GGML tensor a held result and step."""
    _, nodes, values = _linear_steps(6, keep_grads=False)
    assert nodes[4] is nodes[3] and nodes[5] is nodes[4]
    assert not np.array_equal(values[4], values[5])


def test_a_held_result_of_the_last_replay_keeps_its_own_memory_and_values():
    kept, nodes, values = _linear_steps(6, keep_grads=True)
    assert len({id(n) for n in nodes}) == 6
    for grad, value in zip(kept, values):
        np.testing.assert_array_equal(grad.numpy(), value)
