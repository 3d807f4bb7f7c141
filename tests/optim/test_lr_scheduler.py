"""Learning-rate schedulers: the schedules PyTorch also has match it step by step; the others their formula."""

import math

import pytest

import ggrad
from ggrad import optim
from ggrad.optim import lr_scheduler as sched


def _ours(opt_cls=optim.SGD, **kwargs):
    return opt_cls([ggrad.zeros(2, requires_grad=True)], lr=kwargs.pop("lr", 0.1), **kwargs)


def _lrs(opt, scheduler, steps, metrics=None):
    """The lr in force at each of `steps` steps (read before each scheduler.step())."""
    out = []
    for i in range(steps):
        out.append(opt.param_groups[0]["lr"])
        scheduler.step() if metrics is None else scheduler.step(metrics[i])
    return out


def _torch_lrs(torch, make_opt, make_sched, steps, metrics=None):
    p = torch.zeros(2, requires_grad=True)
    opt = make_opt(torch, [p])
    s = make_sched(torch, opt)
    out = []
    for i in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        s.step() if metrics is None else s.step(metrics[i])
    return out, opt


CASES = {
    "step": (lambda m, o: m.StepLR(o, step_size=3, gamma=0.5), 12),
    "cosine": (lambda m, o: m.CosineAnnealingLR(o, T_max=10, eta_min=0.001), 25),
    "onecycle": (lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=20), 20),
    "onecycle3": (lambda m, o: m.OneCycleLR(o, max_lr=0.5, total_steps=30, three_phase=True,
                                            anneal_strategy="linear"), 30),
    "lambda": (lambda m, o: m.LambdaLR(o, lambda e: 1.0 / (1 + e)), 8),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_schedule_matches_torch(name, optimizer):
    torch = pytest.importorskip("torch")
    make, steps = CASES[name]
    ours_opt = _ours(optim.SGD, momentum=0.9) if optimizer == "sgd" else _ours(optim.AdamW)
    ours = _lrs(ours_opt, make(sched, ours_opt), steps)
    if optimizer == "sgd":
        make_opt = lambda t, p: t.optim.SGD(p, lr=0.1, momentum=0.9)  # noqa: E731
    else:
        make_opt = lambda t, p: t.optim.AdamW(p, lr=0.1)  # noqa: E731
    theirs, torch_opt = _torch_lrs(torch, make_opt, lambda t, o: make(t.optim.lr_scheduler, o), steps)
    assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-15)
    if name.startswith("onecycle"):  # momentum / beta1 cycled the same way
        key = "momentum" if optimizer == "sgd" else "betas"
        assert ours_opt.param_groups[0][key] == pytest.approx(torch_opt.param_groups[0][key])


def test_reduce_on_plateau_matches_torch():
    torch = pytest.importorskip("torch")
    metrics = [1.0, 0.9, 0.9, 0.95, 0.91, 0.89, 0.9, 0.9, 0.9, 0.9, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6]
    kwargs = dict(mode="min", factor=0.5, patience=2, threshold=0.01, cooldown=1, min_lr=0.01)
    opt = _ours()
    ours = _lrs(opt, sched.ReduceLROnPlateau(opt, **kwargs), len(metrics), metrics)
    theirs, _ = _torch_lrs(torch, lambda t, p: t.optim.SGD(p, lr=0.1),
                           lambda t, o: t.optim.lr_scheduler.ReduceLROnPlateau(o, **kwargs), len(metrics), metrics)
    assert ours == pytest.approx(theirs)
    assert min(ours) < 0.1


def test_reduce_on_plateau_max_mode_and_tensor_metric():
    opt = _ours()
    s = sched.ReduceLROnPlateau(opt, mode="max", patience=0, factor=0.1)
    s.step(ggrad.tensor(0.5))
    s.step(ggrad.tensor(0.4))
    assert s.get_last_lr() == pytest.approx([0.01])


def test_warmup_cosine_formula():
    opt = _ours(lr=1.0)
    s = sched.WarmupCosineLR(opt, warmup_steps=4, total_steps=14, min_lr=0.1)
    lrs = _lrs(opt, s, 17)
    assert lrs[:5] == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])
    for t in range(4, 15):
        q = (t - 4) / 10
        assert lrs[t] == pytest.approx(0.1 + 0.9 * (1 + math.cos(math.pi * q)) / 2)
    assert lrs[14:] == pytest.approx([0.1, 0.1, 0.1])
    assert sched.LinearWarmupCosine is sched.WarmupCosineLR


def test_warmup_cosine_equals_torch_lambda_form():
    """With min_lr=0 it is Hugging Face's cosine-with-warmup lambda, run through torch's LambdaLR."""
    torch = pytest.importorskip("torch")

    def hf(step, warmup=5, total=20):
        if step < warmup:
            return step / warmup
        q = (step - warmup) / (total - warmup)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * q)))

    opt = _ours(lr=0.3)
    ours = _lrs(opt, sched.WarmupCosineLR(opt, 5, 20), 20)
    theirs, _ = _torch_lrs(torch, lambda t, p: t.optim.SGD(p, lr=0.3),
                           lambda t, o: t.optim.lr_scheduler.LambdaLR(o, hf), 20)
    assert ours == pytest.approx(theirs)


def test_state_dict_resumes_schedule():
    opt = _ours()
    s = sched.CosineAnnealingLR(opt, T_max=10)
    _lrs(opt, s, 4)
    saved = s.state_dict()
    assert "optimizer" not in saved and saved["last_epoch"] == 4
    rest = _lrs(opt, s, 4)
    opt2 = _ours()
    opt2.param_groups[0]["lr"] = rest[0]
    opt2.param_groups[0]["initial_lr"] = 0.1
    s2 = sched.CosineAnnealingLR(opt2, T_max=10, last_epoch=3)
    s2.load_state_dict(saved)
    assert _lrs(opt2, s2, 4) == pytest.approx(rest)


def test_get_last_lr_per_group():
    a, b = ggrad.zeros(1, requires_grad=True), ggrad.zeros(1, requires_grad=True)
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    s = sched.StepLR(opt, step_size=1, gamma=0.5)
    s.step()
    assert s.get_last_lr() == pytest.approx([0.05, 0.5])


def test_scheduler_errors():
    opt = _ours()
    with pytest.raises(TypeError, match="is not an Optimizer"):
        sched.StepLR(object(), 1)
    with pytest.raises(ValueError, match="Invalid step_size"):
        sched.StepLR(opt, 0)
    with pytest.raises(ValueError, match="total_steps OR"):
        sched.OneCycleLR(opt, max_lr=1.0)
    with pytest.raises(ValueError, match="Invalid total_steps"):
        sched.WarmupCosineLR(opt, warmup_steps=10, total_steps=5)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        sched.ReduceLROnPlateau(opt, factor=2.0)
    with pytest.raises(KeyError, match="initial_lr"):
        sched.StepLR(_ours(), 2, last_epoch=3)
    s = sched.OneCycleLR(opt, max_lr=1.0, total_steps=2)
    s.step()
    s.step()
    with pytest.raises(ValueError, match="Tried to step 3 times"):
        s.step()
