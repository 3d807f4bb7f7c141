"""Adadelta, Adamax, NAdam, RAdam, ASGD and Rprop compute one graph a step (their agreement with torch.optim,
groups and state dicts: test_more_optimizers.py); LBFGS follows PyTorch's losses and evaluation counts, with
and without the strong Wolfe line search; the implementation switches PyTorch's optimizers take are accepted."""

import numpy as np
import pytest

import ggrad
from ggrad import optim
from test_optimizers import _assert_close, _ggrad_loss, _ids, _problem, _run_ggrad, _run_torch, _torch_loss

NAMES = ["Adadelta", "Adamax", "NAdam", "RAdam", "ASGD", "Rprop"]


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
