"""SGD and AdamW: agreement with torch.optim over 20 steps, one graph per step, validation, state dicts."""

import numpy as np
import pytest

import ggrad
from ggrad import optim


def _problem(seed=0, dtype=np.float32):
    """A small two-layer regression problem: weights, inputs, targets (numpy)."""
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((8, 5)).astype(dtype) * 0.5
    b1 = rng.standard_normal((8,)).astype(dtype) * 0.1
    w2 = rng.standard_normal((3, 8)).astype(dtype) * 0.5
    xs = [rng.standard_normal((16, 5)).astype(np.float32) for _ in range(4)]
    ys = [rng.standard_normal((16, 3)).astype(np.float32) for _ in range(4)]
    return [w1, b1, w2], xs, ys


def _ggrad_loss(params, x, y):
    w1, b1, w2 = params
    h = (ggrad.tensor(x) @ w1.float().T + b1.float()).tanh()
    return ((h @ w2.float().T - ggrad.tensor(y)) ** 2).mean()


def _torch_loss(torch, params, x, y):
    w1, b1, w2 = params
    h = torch.tanh(torch.from_numpy(x) @ w1.float().T + b1.float())
    return ((h @ w2.float().T - torch.from_numpy(y)) ** 2).mean()


def _run_ggrad(make_opt, steps=20, dtype=np.float32, groups=False, sign=1.0):
    """Train with `make_opt(params)`; `sign=-1` maximizes the negated loss (for maximize=True)."""
    init, xs, ys = _problem(dtype=dtype)
    params = [ggrad.tensor(a, requires_grad=True) for a in init]
    opt = make_opt([{"params": params[:2]}, {"params": params[2:], "lr": 0.02}] if groups else params)
    for i in range(steps):
        opt.zero_grad()
        loss = _ggrad_loss(params, xs[i % 4], ys[i % 4]) * sign
        loss.backward()
        opt.step()
    return [p.numpy().astype(np.float32) for p in params]


def _run_torch(torch, make_opt, steps=20, dtype=np.float32, groups=False, sign=1.0):
    init, xs, ys = _problem(dtype=dtype)
    params = [torch.tensor(a, requires_grad=True) for a in init]
    opt = make_opt([{"params": params[:2]}, {"params": params[2:], "lr": 0.02}] if groups else params)
    for i in range(steps):
        opt.zero_grad()
        loss = _torch_loss(torch, params, xs[i % 4], ys[i % 4]) * sign
        loss.backward()
        opt.step()
    return [p.detach().float().numpy() for p in params]


SGD_CASES = [
    dict(lr=0.05),
    dict(lr=0.05, weight_decay=0.1),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.05),
    dict(lr=0.05, momentum=0.9, nesterov=True),
    dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1, maximize=True),
]

ADAMW_CASES = [
    dict(lr=0.01),
    dict(lr=0.01, weight_decay=0.0),
    dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
    dict(lr=0.01, amsgrad=True),
    dict(lr=0.01, amsgrad=True, weight_decay=0.05, maximize=True),
]


def _ids(cases):
    return [",".join(f"{k}={v}" for k, v in c.items()) for c in cases]


def _assert_close(ours, theirs, rtol=1e-5, atol=1e-6):
    for i, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"parameter {i}")


@pytest.mark.parametrize("kwargs", SGD_CASES, ids=_ids(SGD_CASES))
def test_sgd_matches_torch(kwargs):
    torch = pytest.importorskip("torch")
    sign = -1.0 if kwargs.get("maximize") else 1.0
    ours = _run_ggrad(lambda p: optim.SGD(p, **kwargs), sign=sign)
    theirs = _run_torch(torch, lambda p: torch.optim.SGD(p, **kwargs), sign=sign)
    _assert_close(ours, theirs)


@pytest.mark.parametrize("kwargs", ADAMW_CASES, ids=_ids(ADAMW_CASES))
def test_adamw_matches_torch(kwargs):
    torch = pytest.importorskip("torch")
    sign = -1.0 if kwargs.get("maximize") else 1.0
    ours = _run_ggrad(lambda p: optim.AdamW(p, **kwargs), sign=sign)
    theirs = _run_torch(torch, lambda p: torch.optim.AdamW(p, **kwargs), sign=sign)
    _assert_close(ours, theirs)


@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_param_groups_match_torch(name):
    torch = pytest.importorskip("torch")
    if name == "sgd":
        ours = _run_ggrad(lambda p: optim.SGD(p, lr=0.05, momentum=0.9), groups=True)
        theirs = _run_torch(torch, lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), groups=True)
    else:
        ours = _run_ggrad(lambda p: optim.AdamW(p, lr=0.01), groups=True)
        theirs = _run_torch(torch, lambda p: torch.optim.AdamW(p, lr=0.01), groups=True)
    _assert_close(ours, theirs)


@pytest.mark.parametrize("make", [lambda p: optim.AdamW(p, lr=0.01), lambda p: optim.AdamW(p, lr=0.01, amsgrad=True),
                                  lambda p: optim.SGD(p, lr=0.05, momentum=0.9)], ids=["adamw", "amsgrad", "sgd"])
def test_float16_params_follow_float32_run(make):
    """float16 parameters are updated in float32 and cast back: close to the float32 run."""
    ours16 = _run_ggrad(make, steps=10, dtype=np.float16)
    ours32 = _run_ggrad(make, steps=10, dtype=np.float32)
    init, _, _ = _problem(dtype=np.float16)
    for a16, a32, a0 in zip(ours16, ours32, init):
        assert not np.allclose(a16, a0.astype(np.float32))  # it moved
        np.testing.assert_allclose(a16, a32, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("make", [lambda p: optim.AdamW(p, lr=0.01), lambda p: optim.AdamW(p, amsgrad=True),
                                  lambda p: optim.SGD(p, lr=0.05), lambda p: optim.SGD(p, momentum=0.9),
                                  lambda p: optim.Adam(p, weight_decay=0.1),
                                  lambda p: optim.RMSprop(p, momentum=0.9, centered=True), lambda p: optim.Adagrad(p)],
                         ids=["adamw", "amsgrad", "sgd", "momentum", "adam", "rmsprop", "adagrad"])
def test_backward_and_step_are_one_compute(make):
    init, xs, ys = _problem()
    params = [ggrad.tensor(a, requires_grad=True) for a in init]
    opt = make(params)
    for i in range(3):
        opt.zero_grad()
        loss = _ggrad_loss(params, xs[i], ys[i])
        before = ggrad.stats()["computes"]
        loss.backward()
        opt.step()
        assert ggrad.stats()["computes"] - before == 1
        loss.item()  # already computed by the step
        assert ggrad.stats()["computes"] - before == 1


def test_parameters_without_grad_are_skipped():
    a = ggrad.ones(3, requires_grad=True)
    b = ggrad.ones(3, requires_grad=True)
    opt = optim.AdamW([a, b], lr=0.1)
    (a * 2.0).sum().backward()
    opt.step()
    assert b.grad is None
    np.testing.assert_array_equal(b.numpy(), np.ones(3, np.float32))
    assert opt.state[a]["step"] == 1 and b not in opt.state
    assert np.all(a.numpy() < 1.0)


def test_closure_is_called_and_its_loss_returned():
    w = ggrad.tensor([1.0, -2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert calls == [1]
    assert loss.item() == pytest.approx(5.0)
    np.testing.assert_allclose(w.numpy(), [0.8, -1.6], rtol=1e-6)


def test_zero_grad():
    w = ggrad.ones(2, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    (w * 3.0).sum().backward()
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(w.grad.numpy(), [0.0, 0.0])
    opt.zero_grad()
    assert w.grad is None


@pytest.mark.parametrize("make, message", [
    (lambda p: optim.SGD(p, lr=-0.1), "Invalid learning rate: -0.1"),
    (lambda p: optim.SGD(p, momentum=-1.0), "Invalid momentum value: -1.0"),
    (lambda p: optim.SGD(p, weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
    (lambda p: optim.SGD(p, nesterov=True), "Nesterov momentum requires a momentum and zero dampening"),
    (lambda p: optim.AdamW(p, lr=-1.0), "Invalid learning rate: -1.0"),
    (lambda p: optim.AdamW(p, eps=-1.0), "Invalid epsilon value: -1.0"),
    (lambda p: optim.AdamW(p, betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
    (lambda p: optim.AdamW(p, betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    (lambda p: optim.AdamW(p, weight_decay=-0.5), "Invalid weight_decay value: -0.5"),
    (lambda p: optim.AdamW([{"params": p, "lr": -3.0}]), "Invalid learning rate: -3.0"),
])
def test_invalid_hyperparameters(make, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make([ggrad.ones(2, requires_grad=True)])


def test_invalid_params():
    w = ggrad.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
        optim.SGD(w, lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [w]}, {"params": [w]}], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([w * 2.0], lr=0.1)
    with pytest.raises(TypeError, match="only optimize Tensors"):
        optim.SGD([w, 3.0], lr=0.1)


def test_add_param_group_and_repr():
    a = ggrad.ones(2, requires_grad=True)
    b = ggrad.ones(2, requires_grad=True)
    opt = optim.SGD([a], lr=0.1, momentum=0.5)
    opt.add_param_group({"params": b, "lr": 0.01})
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.01]
    assert opt.param_groups[1]["momentum"] == 0.5
    assert "Parameter Group 1" in repr(opt) and "lr: 0.01" in repr(opt)
    (a.sum() + b.sum()).backward()
    opt.step()
    np.testing.assert_allclose(a.numpy(), [0.9, 0.9], rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), [0.99, 0.99], rtol=1e-6)


def test_lr_change_takes_effect_without_rebuilding():
    w = ggrad.zeros(2, requires_grad=True)
    opt = optim.SGD([w], lr=1.0)
    for lr in (1.0, 0.5, 0.25):
        opt.param_groups[0]["lr"] = lr
        opt.zero_grad()
        w.sum().backward()
        opt.step()
    np.testing.assert_allclose(w.numpy(), [-1.75, -1.75], rtol=1e-6)
