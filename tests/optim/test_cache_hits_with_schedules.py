"""Training loops whose hyper-parameters change every step (an lr schedule, Adam's bias corrections, a
GradScaler) still reuse the cached graphs after their first steps, with results bitwise those of the
uncached path."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
from ggrad import optim


def _loop(cached, make_opt, dtype=ggrad.float32, steps=5, scaler=False, growth_interval=2000):
    """`steps` steps of a small model with a LambdaLR schedule; (losses, parameters, hits, misses)."""
    ggrad.set_graph_cache(cached)
    try:
        ggrad.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).to(dtype)
        opt = make_opt(model.parameters())
        schedule = optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0 / (i + 1))
        amp = ggrad.amp.GradScaler(init_scale=2.0 ** 8, growth_interval=growth_interval) if scaler else None
        x = ggrad.tensor(np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)).to(dtype)
        ggrad.realize()
        ggrad.reset_stats()
        losses = []
        for _ in range(steps):
            loss = model(x).float().square().mean()
            opt.zero_grad()
            if amp is None:
                loss.backward()
                opt.step()
            else:
                amp.scale(loss).backward()
                amp.step(opt)
                amp.update()
            schedule.step()
            losses.append(loss.item())
        stats = ggrad.stats()
        return losses, [p.float().numpy() for p in model.parameters()], stats["cache_hits"], stats["cache_misses"]
    finally:
        ggrad.set_graph_cache(True)


def _assert_bitwise(a, b):
    assert a[0] == b[0]
    for pa, pb in zip(a[1], b[1]):
        np.testing.assert_array_equal(pa, pb)


@pytest.mark.parametrize("amsgrad,dtype", [(True, ggrad.float32), (False, ggrad.float16)], ids=["amsgrad", "f16"])
def test_composed_adamw_with_a_schedule_misses_only_its_first_steps(amsgrad, dtype):
    make = lambda params: optim.AdamW(params, lr=1e-2, weight_decay=0.1, amsgrad=amsgrad)  # noqa: E731
    plain, cached = _loop(False, make, dtype), _loop(True, make, dtype)
    _assert_bitwise(plain, cached)
    assert plain[2] == 0
    assert cached[3] <= 2 and cached[2] >= 3   # step 1 uploads the states, step 2 reads them computed


def test_grad_scaler_with_adamw_and_a_schedule_misses_only_in_its_first_steps():
    """A scaled step is one graph (backward, inf check and the update conditional on it): it replays from
    the third step on."""
    make = lambda params: optim.AdamW(params, lr=1e-2, weight_decay=0.1)  # noqa: E731
    plain, cached = _loop(False, make, scaler=True), _loop(True, make, scaler=True)
    _assert_bitwise(plain, cached)
    assert cached[2] + cached[3] == 5
    assert cached[3] <= 2   # step 1 uploads the states, step 2 reads them computed


def test_a_changing_grad_scale_reuses_the_cached_graphs():
    """The scale (and its inverse) go into the graph as data: a scale that grows every step (growth_interval
    1) misses no more than a constant one."""
    make = lambda params: optim.AdamW(params, lr=1e-2, weight_decay=0.1)  # noqa: E731
    plain = _loop(False, make, steps=6, scaler=True, growth_interval=1)
    cached = _loop(True, make, steps=6, scaler=True, growth_interval=1)
    _assert_bitwise(plain, cached)
    assert cached[3] <= 2 and cached[2] + cached[3] == 6
