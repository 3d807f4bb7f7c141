"""ggrad.compile_step: a training step recorded once and replayed whole gives bitwise what the same steps
run eagerly give (values, gradients, optimizer and scaler state), and runs eagerly, with a warning, where
it cannot be replayed."""

import gc
import warnings

import numpy as np
import pytest

import ggrad
from ggrad import nn, optim

STEPS = 7


def _model(dropout=0.0):
    ggrad.manual_seed(0)
    layers = [nn.Linear(6, 12), nn.GELU()] + ([nn.Dropout(dropout)] if dropout else []) + [nn.Linear(12, 3)]
    return nn.Sequential(*layers)


def _batches(n=STEPS, batch=5, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((batch, 6)).astype(np.float32), rng.integers(0, 3, batch).astype(np.int32))
            for _ in range(n)]


def _train(make_opt, compiled, batches=None, dropout=0.0, clip=None, scheduler=None, between=None):
    """Losses, parameters, gradients and the optimizer's state dict after training on `batches`, eagerly or
    with compile_step; `between(model, i)` runs between two steps."""
    model = _model(dropout)
    opt = make_opt(model.parameters())
    sched = scheduler(opt) if scheduler else None

    def step(x, y):
        opt.zero_grad()
        loss = ggrad.cross_entropy(model(x), y)
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        return loss

    run = ggrad.compile_step(step) if compiled else step
    ggrad.manual_seed(1)   # dropout's draws
    losses = []
    for i, (x, y) in enumerate(batches or _batches()):
        losses.append(run(ggrad.tensor(x), ggrad.tensor(y)).item())
        if sched is not None:
            sched.step()
        if between is not None:
            between(model, i)
    params = [p.detach().numpy() for p in model.parameters()]
    grads = [p.grad.numpy() for p in model.parameters()]
    return losses, params, grads, opt.state_dict(), run


def _assert_same(eager, compiled):
    assert eager[0] == compiled[0]
    for a, b in zip(eager[1] + eager[2], compiled[1] + compiled[2]):
        np.testing.assert_array_equal(a, b)
    se, sc = eager[3], compiled[3]
    assert se["param_groups"] == sc["param_groups"]
    for k in se["state"]:
        for name, v in se["state"][k].items():
            w = sc["state"][k][name]
            if isinstance(v, ggrad.Tensor):
                np.testing.assert_array_equal(v.numpy(), w.numpy())
            else:
                assert v == w


@pytest.mark.parametrize("make_opt", [
    lambda p: optim.SGD(p, lr=0.1),
    lambda p: optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-3),
    lambda p: optim.AdamW(p, lr=1e-2),
    lambda p: optim.Adam(p, lr=1e-2, weight_decay=1e-2),
], ids=["sgd", "sgd-momentum", "adamw", "adam-l2"])
def test_replayed_steps_equal_eager_steps(make_opt):
    before = ggrad.stats()["step_replays"]
    eager = _train(make_opt, False)
    compiled = _train(make_opt, True)
    _assert_same(eager, compiled)
    step = compiled[4]
    assert step.records + step.replays == STEPS
    assert step.replays >= STEPS - 3   # recorded until two calls agree (a first step makes its state)
    assert ggrad.stats()["step_replays"] - before == step.replays


def test_learning_rate_schedule_is_an_input_of_the_replayed_step():
    make = lambda p: optim.AdamW(p, lr=1e-2)   # noqa: E731
    sched = lambda opt: optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)   # noqa: E731
    eager = _train(make, False, scheduler=sched)
    compiled = _train(make, True, scheduler=sched)
    _assert_same(eager, compiled)
    assert compiled[4].replays >= STEPS - 3
    assert compiled[3]["param_groups"][0]["lr"] == pytest.approx(1e-2 * 0.5 ** (STEPS // 2))


def test_dropout_draws_new_masks_as_the_eager_step_does():
    make = lambda p: optim.SGD(p, lr=0.1)   # noqa: E731
    eager = _train(make, False, dropout=0.5)
    compiled = _train(make, True, dropout=0.5)
    _assert_same(eager, compiled)
    assert compiled[4].replays >= STEPS - 3
    # the same batch every step: only the masks differ, so the losses do
    same = [_batches(1)[0]] * STEPS
    losses = _train(make, True, batches=same, dropout=0.5)[0]
    assert len(set(losses)) > 1


def test_gradient_clipping_inside_the_step():
    make = lambda p: optim.SGD(p, lr=0.5)   # noqa: E731
    eager = _train(make, False, clip=0.05)
    compiled = _train(make, True, clip=0.05)
    _assert_same(eager, compiled)
    assert compiled[4].replays >= STEPS - 3


def test_an_evaluation_between_steps_keeps_the_replay():
    make = lambda p: optim.AdamW(p, lr=1e-2)   # noqa: E731
    x_eval = ggrad.tensor(np.ones((9, 6), np.float32))
    seen = {True: [], False: []}

    def evaluate(compiled):
        def between(model, i):
            with ggrad.no_grad():
                seen[compiled].append(model(x_eval).sum().item())
        return between
    eager = _train(make, False, between=evaluate(False))
    compiled = _train(make, True, between=evaluate(True))
    _assert_same(eager, compiled)
    assert seen[True] == seen[False]
    assert compiled[4].records <= 3 and compiled[4].replays == STEPS - compiled[4].records


def test_a_changed_batch_shape_records_again():
    make = lambda p: optim.SGD(p, lr=0.1, momentum=0.5)   # noqa: E731
    batches = _batches(4) + _batches(4, batch=3, seed=1) + _batches(3, seed=2)
    eager = _train(make, False, batches=batches)
    compiled = _train(make, True, batches=batches)
    _assert_same(eager, compiled)
    step = compiled[4]
    assert step.replays >= 5 and step.records + step.replays == len(batches)


def test_requires_grad_changed_records_again():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)

    @ggrad.compile_step
    def step(x, y):
        opt.zero_grad()
        loss = ggrad.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    for x, y in _batches(4):
        step(ggrad.tensor(x), ggrad.tensor(y))
    records = step.records
    frozen = model[0].weight
    frozen.requires_grad_(False)
    before = frozen.detach().numpy()
    for x, y in _batches(3, seed=3):
        step(ggrad.tensor(x), ggrad.tensor(y))
    assert step.records > records
    np.testing.assert_array_equal(frozen.detach().numpy(), before)


def test_grad_scaler_with_a_skipped_step():
    """autocast f16 + GradScaler: a batch whose gradients overflow skips its update (parameters, step counts
    kept), backs the scale off; the scale grows after growth_interval good steps; all as eager."""
    def train(compiled):
        model = _model()
        opt = optim.AdamW(model.parameters(), lr=1e-2)
        scaler = ggrad.amp.GradScaler(init_scale=2.0 ** 10, growth_interval=2)

        def step(x, y):
            opt.zero_grad()
            with ggrad.autocast("cpu", dtype=ggrad.float16):
                loss = ggrad.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            return loss
        run = ggrad.compile_step(step) if compiled else step
        out = []
        for i, (x, y) in enumerate(_batches(9)):
            if i == 6:
                x = x * 6e4   # overflows float16 in the forward's products: inf/nan gradients
            loss = run(ggrad.tensor(x), ggrad.tensor(y))
            out.append((loss.float().item(), scaler.get_scale(), scaler._growth_tracker,
                        opt.state_dict()["state"][0]["step"]))
        return out, [p.detach().numpy() for p in model.parameters()], run
    eager, compiled = train(False), train(True)
    assert [o[1:] for o in eager[0]] == [o[1:] for o in compiled[0]]
    np.testing.assert_array_equal(np.array([o[0] for o in eager[0]]), np.array([o[0] for o in compiled[0]]))
    assert eager[0][6][3] == eager[0][5][3]   # the skipped step kept the counts
    assert eager[0][6][1] < eager[0][5][1]    # and backed the scale off
    for a, b in zip(eager[1], compiled[1]):
        np.testing.assert_array_equal(a, b)
    assert compiled[2].replays >= 5


def _warns_and_equals(make_opt, step_of, n=5):
    """step_of(model, opt) is the step; it runs eagerly under compile_step, with a RuntimeWarning."""
    results = []
    for compiled in (False, True):
        model = _model()
        opt = make_opt(model.parameters())
        step = step_of(model, opt)
        run = ggrad.compile_step(step) if compiled else step
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            losses = [float(run(ggrad.tensor(x), ggrad.tensor(y))) for x, y in _batches(n)]
        results.append((losses, [p.detach().numpy() for p in model.parameters()], caught, run))
    (le, pe, _, _), (lc, pc, caught, run) = results
    assert le == lc
    for a, b in zip(pe, pc):
        np.testing.assert_array_equal(a, b)
    assert run.replays == 0
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "runs eagerly" in messages[0]
    return messages[0]


def _plain_step(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = ggrad.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def test_an_optimizer_without_replay_runs_eagerly_with_a_warning():
    message = _warns_and_equals(lambda p: optim.RMSprop(p, lr=1e-2), _plain_step)
    assert "RMSprop" in message


def test_a_host_read_before_the_update_runs_eagerly_with_a_warning():
    def step_of(model, opt):
        def step(x, y):
            opt.zero_grad()
            loss = ggrad.cross_entropy(model(x), y)
            loss.backward()
            if loss.item() > 1e9:   # a value read before the update: two computes a call
                return loss
            opt.step()
            return loss
        return step
    assert "graphs a call" in _warns_and_equals(lambda p: optim.SGD(p, lr=0.1), step_of)


def test_gradients_that_accumulate_run_eagerly_with_a_warning():
    def step_of(model, opt):
        def step(x, y):   # no zero_grad: each step reads the last one's gradients
            loss = ggrad.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return step
    assert "previous call" in _warns_and_equals(lambda p: optim.SGD(p, lr=0.01), step_of, n=6)


def test_a_value_that_is_not_an_argument_runs_eagerly_with_a_warning():
    def step_of(model, opt):
        batches = iter(_batches(20, seed=5))

        def step(x, y):   # reads a fresh batch of its own: an upload that changes and is no argument
            xb, _ = next(batches)
            opt.zero_grad()
            loss = ggrad.cross_entropy(model(ggrad.tensor(xb)), y)
            loss.backward()
            opt.step()
            return loss
        return step
    assert "not one of its Tensor arguments" in _warns_and_equals(lambda p: optim.SGD(p, lr=0.1), step_of)


def test_the_replay_buffer_is_freed_with_the_step():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    step = ggrad.compile_step(_plain_step(model, opt))
    for x, y in _batches(4):
        loss = step(ggrad.tensor(x), ggrad.tensor(y))
    assert step.replays >= 1
    memory = ggrad.stats()["memory"]["CPU"]
    assert memory["replay_buffers"] > 0
    held = loss.item()
    del step
    gc.collect()
    assert loss.item() == held   # a result still held keeps its memory
    del loss
    gc.collect()
    assert ggrad.stats()["memory"]["CPU"]["replay_buffers"] == 0


def test_results_of_earlier_calls_stay_valid():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    step = ggrad.compile_step(_plain_step(model, opt))
    losses, values = [], []
    for x, y in _batches(6):
        loss = step(ggrad.tensor(x), ggrad.tensor(y))
        losses.append(loss)
        values.append(loss.item())
    assert [t.item() for t in losses] == values
    assert step.replays >= 3


def test_an_index_out_of_range_raises_at_a_replay_as_eagerly():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    step = ggrad.compile_step(_plain_step(model, opt))
    for x, y in _batches(4):
        step(ggrad.tensor(x), ggrad.tensor(y))
    assert step.replays >= 1
    x, y = _batches(1)[0]
    y[2] = 7   # 3 classes
    with pytest.raises(IndexError):
        _plain_step(model, opt)(ggrad.tensor(x), ggrad.tensor(y))
    with pytest.raises(IndexError):
        step(ggrad.tensor(x), ggrad.tensor(y))


def test_gradients_held_across_calls_keep_their_values():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    step = ggrad.compile_step(_plain_step(model, opt))
    kept = []
    for i, (x, y) in enumerate(_batches(8)):
        step(ggrad.tensor(x), ggrad.tensor(y))
        if i in (3, 5):
            kept.append((model[0].weight.grad, model[0].weight.grad.numpy()))
        if i == 6:
            kept = kept[1:]   # the first is dropped: its memory may be used again
    assert step.replays >= 4
    for g, value in kept:
        np.testing.assert_array_equal(g.numpy(), value)


def test_a_replayed_call_records_no_op(monkeypatch):
    from ggrad.autograd.primitive import Primitive
    model = _model(dropout=0.2)
    opt = optim.AdamW(model.parameters(), lr=1e-2)
    step = ggrad.compile_step(_plain_step(model, opt))
    batches = [(ggrad.tensor(x), ggrad.tensor(y)) for x, y in _batches(6)]
    for x, y in batches[:3]:
        step(x, y)
    recorded = []
    record = Primitive._record.__func__
    monkeypatch.setattr(Primitive, "_record", classmethod(lambda cls, *a: recorded.append(cls) or record(cls, *a)))
    replays = step.replays
    for x, y in batches[3:]:
        step(x, y)
    assert step.replays == replays + 3 and recorded == []


def test_an_unhashable_argument_runs_eagerly_with_a_warning():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    plain = _plain_step(model, opt)
    step = ggrad.compile_step(lambda x, y, options: plain(x, y))
    x, y = _batches(1)[0]
    with pytest.warns(RuntimeWarning, match="not hashable"):
        loss = step(ggrad.tensor(x), ggrad.tensor(y), {1, 2})
    assert np.isfinite(loss.item()) and step.records == 0


def test_autocast_around_the_step_is_part_of_its_key():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    step = ggrad.compile_step(_plain_step(model, opt))
    records, replays = [], []
    for dtype in (ggrad.float16, ggrad.bfloat16, ggrad.float16):
        with ggrad.autocast("cpu", dtype=dtype):
            for x, y in _batches(4):
                step(ggrad.tensor(x), ggrad.tensor(y))
        records.append(step.records)
        replays.append(step.replays)
    assert records[1] > records[0] and records[2] == records[1]   # bf16 recorded anew; f16 again replayed
    assert replays[2] == replays[1] + 4 and len(step._replays) == 2


def test_an_argument_that_requires_grad_runs_eagerly_with_a_warning():
    w = ggrad.tensor(np.ones(3, np.float32), requires_grad=True)

    @ggrad.compile_step
    def step(x):
        loss = (x * w).sum()
        loss.backward()
        return loss
    x = ggrad.tensor(np.arange(3, dtype=np.float32), requires_grad=True)
    with pytest.warns(RuntimeWarning, match="requires grad"):
        step(x)
    np.testing.assert_array_equal(x.grad.numpy(), 1.0)
