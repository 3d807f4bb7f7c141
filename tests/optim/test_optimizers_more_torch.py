"""Adadelta, Adamax, NAdam, RAdam, ASGD and Rprop agree with torch.optim over 20 steps (with groups and
their options), compute one graph a step, resume from state dicts; LBFGS follows PyTorch's losses and
evaluation counts, with and without the strong Wolfe line search; the implementation switches PyTorch's
optimizers take are accepted."""

import numpy as np
import pytest

import ggrad
from ggrad import optim
from test_optimizers import _assert_close, _ggrad_loss, _ids, _problem, _run_ggrad, _run_torch, _torch_loss

CASES = [
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


NAMES = ["Adadelta", "Adamax", "NAdam", "RAdam", "ASGD", "Rprop"]


@pytest.mark.parametrize("name", NAMES)
def test_param_groups_match_torch(name):
    torch = pytest.importorskip("torch")
    ours = _run_ggrad(lambda p: getattr(optim, name)(p, lr=0.01), groups=True)
    theirs = _run_torch(torch, lambda p: getattr(torch.optim, name)(p, lr=0.01), groups=True)
    _assert_close(ours, theirs, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", NAMES)
def test_state_dict_resumes_exactly(name):
    """5 steps, save, 5 more == 10 steps straight."""
    make = getattr(optim, name)
    straight = _run_ggrad(lambda p: make(p, lr=0.01), steps=10)
    init, xs, ys = _problem()
    params = [ggrad.tensor(a, requires_grad=True) for a in init]

    def steps(opt, params, start, n):
        for i in range(start, start + n):
            opt.zero_grad()
            _ggrad_loss(params, xs[i % 4], ys[i % 4]).backward()
            opt.step()
    opt = make(params, lr=0.01)
    steps(opt, params, 0, 5)
    saved = opt.state_dict()
    resumed = [ggrad.tensor(p.numpy(), requires_grad=True) for p in params]
    again = make(resumed, lr=0.01)
    again.load_state_dict(saved)
    steps(again, resumed, 5, 5)
    for a, b in zip(straight, resumed):
        np.testing.assert_array_equal(a, b.numpy())


@pytest.mark.parametrize("name", NAMES)
def test_one_compute_per_step(name):
    init, xs, ys = _problem()
    params = [ggrad.tensor(a, requires_grad=True) for a in init]
    opt = getattr(optim, name)(params, lr=0.01)
    for i in range(3):
        opt.zero_grad()
        _ggrad_loss(params, xs[i], ys[i]).backward()
        before = ggrad.stats()["computes"]
        opt.step()
        assert ggrad.stats()["computes"] - before == 1


@pytest.mark.parametrize("name, kwargs, message", [
    ("Adadelta", dict(rho=1.5), "Invalid rho value"), ("Adamax", dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0"),
    ("NAdam", dict(momentum_decay=-1), "Invalid momentum_decay value"), ("RAdam", dict(lr=-1), "Invalid learning rate"),
    ("Rprop", dict(etas=(1.5, 2.0)), "Invalid eta values")])
def test_invalid_hyperparameters_raise_as_torch(name, kwargs, message):
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match=message):
        getattr(optim, name)([ggrad.zeros(2, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError, match=message):
        getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **kwargs)


@pytest.mark.parametrize("name, flags", [("SGD", dict(foreach=True, fused=False)),
                                         ("Adam", dict(foreach=False, fused=True, capturable=False)),
                                         ("AdamW", dict(foreach=True, fused=None)), ("RMSprop", dict(foreach=True)),
                                         ("Adagrad", dict(foreach=None, fused=False)), ("NAdam", dict(foreach=True))])
def test_implementation_switches_are_accepted_and_change_nothing(name, flags):
    torch = pytest.importorskip("torch")
    plain = _run_ggrad(lambda p: getattr(optim, name)(p, lr=0.01), steps=3)
    switched = _run_ggrad(lambda p: getattr(optim, name)(p, lr=0.01, **flags), steps=3)
    _assert_close(plain, switched, rtol=0, atol=0)
    getattr(torch.optim, name)([torch.zeros(1, requires_grad=True)], lr=0.01, **flags)   # PyTorch takes them too
    with pytest.raises(TypeError, match="foreach"):
        getattr(optim, name)([ggrad.zeros(1, requires_grad=True)], lr=0.01, foreach="yes")


def test_sgd_takes_weight_decay_before_nesterov_as_pytorch():
    torch = pytest.importorskip("torch")
    ours = _run_ggrad(lambda p: optim.SGD(p, 0.05, 0.9, 0.0, 0.1))
    theirs = _run_torch(torch, lambda p: torch.optim.SGD(p, 0.05, 0.9, 0.0, 0.1))
    _assert_close(ours, theirs)


def test_adam_decoupled_weight_decay_is_adamw():
    ours = _run_ggrad(lambda p: optim.Adam(p, lr=0.01, weight_decay=0.1, decoupled_weight_decay=True))
    _assert_close(ours, _run_ggrad(lambda p: optim.AdamW(p, lr=0.01, weight_decay=0.1)), rtol=0, atol=0)


def _lbfgs_run(lib, steps, **kwargs):
    """A least-squares fit plus a tanh layer, trained by LBFGS for `steps` steps: the parameters and losses."""
    init, xs, ys = _problem()
    if lib is ggrad:
        params = [ggrad.tensor(a, requires_grad=True) for a in init]
        loss_of = lambda: _ggrad_loss(params, xs[0], ys[0])  # noqa: E731
    else:
        params = [lib.tensor(a, requires_grad=True) for a in init]
        loss_of = lambda: _torch_loss(lib, params, xs[0], ys[0])  # noqa: E731
    opt = lib.optim.LBFGS(params, **kwargs)

    def closure():
        opt.zero_grad()
        loss = loss_of()
        loss.backward()
        return loss
    losses = [float(opt.step(closure)) for _ in range(steps)]
    state = opt.state[params[0]]
    return [np.asarray(p.detach().numpy(), np.float32) for p in params], losses, state["func_evals"], state["n_iter"]


LBFGS_CASES = [dict(lr=0.5, max_iter=5), dict(lr=1, max_iter=4, history_size=2),
               dict(line_search_fn="strong_wolfe", max_iter=6),
               dict(line_search_fn="strong_wolfe", max_iter=10, history_size=3)]


@pytest.mark.parametrize("kwargs", LBFGS_CASES, ids=_ids(LBFGS_CASES))
def test_lbfgs_matches_torch(kwargs):
    torch = pytest.importorskip("torch")
    ours = _lbfgs_run(ggrad, 3, **kwargs)
    theirs = _lbfgs_run(torch, 3, **kwargs)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-4)
    _assert_close(ours[0], theirs[0], rtol=2e-3, atol=2e-4)
    assert ours[2:] == theirs[2:]                     # the same number of evaluations and iterations
    assert ours[1][-1] < ours[1][0]


def test_lbfgs_refuses_what_pytorch_refuses():
    torch = pytest.importorskip("torch")
    for lib in (torch, ggrad):
        p = lib.zeros(2, requires_grad=True)
        with pytest.raises(ValueError, match="per-parameter options"):
            lib.optim.LBFGS([{"params": [p]}, {"params": [lib.zeros(1, requires_grad=True)]}])
    with pytest.raises(RuntimeError, match="closure"):
        optim.LBFGS([ggrad.zeros(2, requires_grad=True)]).step()
    with pytest.raises(ValueError, match="strong_wolfe"):
        optim.LBFGS([ggrad.zeros(2, requires_grad=True)], line_search_fn="armijo")


def test_lbfgs_state_dict_resumes():
    init, xs, ys = _problem()

    def run(split):
        params = [ggrad.tensor(a, requires_grad=True) for a in init]
        opt = optim.LBFGS(params, max_iter=3, history_size=4)

        def closure():
            opt.zero_grad()
            loss = _ggrad_loss(params, xs[1], ys[1])
            loss.backward()
            return loss
        for _ in range(2):
            opt.step(closure)
        if split:
            saved = opt.state_dict()
            params = [ggrad.tensor(p.numpy(), requires_grad=True) for p in params]
            opt = optim.LBFGS(params, max_iter=3, history_size=4)
            opt.load_state_dict(saved)
        for _ in range(2):
            opt.step(closure)
        return [p.numpy() for p in params]
    _assert_close(run(False), run(True), rtol=0, atol=0)
