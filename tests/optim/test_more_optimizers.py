"""Adam, RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD and Rprop: agreement with torch.optim over 20
steps, groups, state dicts, PyTorch's refusals (one compute a step: test_optimizers.py and
test_optimizers_more_torch.py)."""

import numpy as np
import pytest

import ggrad
from ggrad import optim
from test_optimizers import _assert_close, _ggrad_loss, _ids, _problem, _run_ggrad, _run_torch

CASES = [
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, amsgrad=True, weight_decay=0.05)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, maximize=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True)),
    ("RMSprop", dict(lr=0.005, momentum=0.5, eps=1e-4, maximize=True)),
    ("Adagrad", dict(lr=0.05)),
    ("Adagrad", dict(lr=0.05, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.1)),
    ("Adagrad", dict(lr=0.05, eps=1e-6, maximize=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1)),
    ("Adadelta", dict(lr=0.5, maximize=True)),
    ("Adamax", dict(lr=0.01)),
    ("Adamax", dict(lr=0.02, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)),
    ("Adamax", dict(lr=0.01, maximize=True)),
    ("NAdam", dict(lr=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("NAdam", dict(lr=0.01, maximize=True)),
    ("RAdam", dict(lr=0.01)),
    ("RAdam", dict(lr=0.01, betas=(0.9, 0.9), weight_decay=0.1)),          # rho_t > 5 from step 6 on
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, betas=(0.8, 0.8))),
    ("ASGD", dict(lr=0.05)),
    ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=5, weight_decay=0.1)),
    ("ASGD", dict(lr=0.05, t0=3, maximize=True)),
    ("Rprop", dict(lr=0.01)),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.08))),
    ("Rprop", dict(lr=0.01, maximize=True)),
]


@pytest.mark.parametrize("name, kwargs", CASES,
                         ids=[f"{n}:{i}" for (n, _), i in zip(CASES, _ids([c for _, c in CASES]))])
def test_matches_torch(name, kwargs):
    torch = pytest.importorskip("torch")
    sign = -1.0 if kwargs.get("maximize") else 1.0
    ours = _run_ggrad(lambda p: getattr(optim, name)(p, **kwargs), sign=sign)
    theirs = _run_torch(torch, lambda p: getattr(torch.optim, name)(p, **kwargs), sign=sign)
    _assert_close(ours, theirs, rtol=2e-5, atol=2e-6)


NAMES = ["Adam", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "ASGD", "Rprop"]


@pytest.mark.parametrize("name", NAMES)
def test_param_groups_match_torch(name):
    torch = pytest.importorskip("torch")
    ours = _run_ggrad(lambda p: getattr(optim, name)(p, lr=0.01), groups=True)
    theirs = _run_torch(torch, lambda p: getattr(torch.optim, name)(p, lr=0.01), groups=True)
    _assert_close(ours, theirs, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", NAMES)
def test_state_dict_resumes_exactly(name):
    """5 steps, save, 5 more == 10 steps straight (state buffers and step counts round-trip)."""
    make = getattr(optim, name)
    straight = _run_ggrad(lambda p: make(p, lr=0.01), steps=10)
    init, xs, ys = _problem()
    params = [ggrad.tensor(a, requires_grad=True) for a in init]
    opt = make(params, lr=0.01)

    def steps(opt, params, start, n):
        for i in range(start, start + n):
            opt.zero_grad()
            _ggrad_loss(params, xs[i % 4], ys[i % 4]).backward()
            opt.step()
    steps(opt, params, 0, 5)
    saved = opt.state_dict()
    resumed = [ggrad.tensor(p.numpy(), requires_grad=True) for p in params]
    opt2 = make(resumed, lr=0.01)
    opt2.load_state_dict(saved)
    steps(opt2, resumed, 5, 5)
    for a, b in zip(straight, resumed):
        np.testing.assert_array_equal(a, b.numpy())


@pytest.mark.parametrize("name, kwargs, message", [
    ("Adam", dict(lr=-1), "Invalid learning rate: -1"), ("RMSprop", dict(alpha=-0.5), "Invalid alpha value"),
    ("RMSprop", dict(eps=-1), "Invalid epsilon value"), ("Adagrad", dict(lr_decay=-1), "Invalid lr_decay value"),
    ("Adadelta", dict(rho=1.5), "Invalid rho value"),
    ("Adamax", dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0"),
    ("NAdam", dict(momentum_decay=-1), "Invalid momentum_decay value"), ("RAdam", dict(lr=-1), "Invalid learning rate"),
    ("Rprop", dict(etas=(1.5, 2.0)), "Invalid eta values")])
def test_invalid_hyperparameters_raise_as_torch(name, kwargs, message):
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match=message):
        getattr(optim, name)([ggrad.zeros(2, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError, match=message):
        getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **kwargs)


def test_adamw_is_an_adam_as_in_pytorch():
    torch = pytest.importorskip("torch")
    assert issubclass(optim.AdamW, optim.Adam) == issubclass(torch.optim.AdamW, torch.optim.Adam)
    assert not issubclass(optim.Adam, optim.AdamW) and not issubclass(torch.optim.Adam, torch.optim.AdamW)


@pytest.mark.parametrize("make", [lambda p: optim.Adagrad(p, lr=0.05, lr_decay=0.1),
                                  lambda p: optim.RMSprop(p, lr=0.01, momentum=0.5)], ids=["adagrad", "rmsprop"])
def test_changing_learning_rates_reuse_the_step_graph(make):
    """The learning rate is data of the step, so a schedule (or Adagrad's decay) keeps hitting the graph cache."""
    init, xs, ys = _problem()
    params = [ggrad.tensor(a, requires_grad=True) for a in init]
    opt = make(params)
    schedule = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9)
    for i in range(6):
        if i == 3:
            ggrad.reset_stats()
        opt.zero_grad()
        _ggrad_loss(params, xs[i % 4], ys[i % 4]).backward()
        opt.step()
        schedule.step()
    assert ggrad.stats()["cache_misses"] == 0 and ggrad.stats()["cache_hits"] == 3
