"""The schedulers of lr_schedules and lr_scheduler_chains follow PyTorch's trajectories step by step: alone,
chained, in sequence, jumped to an epoch, resumed from a state dict, with momentum cycled."""

import pytest

import ggrad
from ggrad import optim
from ggrad.optim import lr_scheduler as sched

torch = pytest.importorskip("torch")


def _run(lib, make, steps, opt="sgd", epochs=None):
    """The lr of groups 0 and 1 and the momentum (or beta1) of group 0 in force before each step, flat, for
    `lib` (ggrad or torch); and the scheduler."""
    params = [lib.zeros(2, requires_grad=True), lib.zeros(1, requires_grad=True)]
    groups = [{"params": [params[0]]}, {"params": [params[1]], "lr": 0.05}]
    o = lib.optim.SGD(groups, lr=0.1, momentum=0.9) if opt == "sgd" else lib.optim.AdamW(groups, lr=0.1)
    s = make(lib.optim.lr_scheduler, o)
    out = []
    for i in range(steps):
        g = o.param_groups[0]
        out += [g["lr"], o.param_groups[1]["lr"], g["momentum"] if opt == "sgd" else g["betas"][0]]
        o.step()
        s.step() if epochs is None else s.step(epochs[i])
    return out, s


CASES = {
    "multistep": (lambda m, o: m.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.5), 12),
    "exponential": (lambda m, o: m.ExponentialLR(o, gamma=0.8), 10),
    "multiplicative": (lambda m, o: m.MultiplicativeLR(o, lambda e: 0.9 if e % 2 else 0.95), 10),
    "constant": (lambda m, o: m.ConstantLR(o, factor=0.25, total_iters=4), 8),
    "linear": (lambda m, o: m.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=6), 10),
    "polynomial": (lambda m, o: m.PolynomialLR(o, total_iters=7, power=2.0), 10),
    "warm_restarts": (lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.001), 25),
    "warm_restarts_1": (lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=4), 13),
    "cyclic": (lambda m, o: m.CyclicLR(o, base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=3, step_size_down=5), 20),
    "cyclic2": (lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=2, mode="triangular2"), 20),
    "cyclic_exp": (lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=2, mode="exp_range", gamma=0.9), 15),
    "cyclic_fn": (lambda m, o: m.CyclicLR(o, 0.01, 0.1, 3, scale_fn=lambda x: 1 / (1 + x), scale_mode="iterations",
                                          cycle_momentum=False), 12),
    "sequential": (lambda m, o: m.SequentialLR(o, [m.LinearLR(o, 0.1, total_iters=3), m.ExponentialLR(o, 0.9),
                                                   m.ConstantLR(o, 0.5, 2)], milestones=[4, 8]), 14),
    "sequential_cos": (lambda m, o: m.SequentialLR(o, [m.ConstantLR(o, 0.1, 2), m.CosineAnnealingLR(o, 5)],
                                                   milestones=[3]), 12),
    "chained": (lambda m, o: m.ChainedScheduler([m.ConstantLR(o, 0.1, 4), m.ExponentialLR(o, 0.9),
                                                 m.MultiStepLR(o, [3, 6])]), 10),
    "chained_poly": (lambda m, o: m.ChainedScheduler([m.LinearLR(o, 0.5, total_iters=3), m.PolynomialLR(o, 6)],
                                                     optimizer=o), 9),
}


@pytest.mark.parametrize("opt", ["sgd", "adamw"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_trajectory_matches_pytorch(name, opt):
    make, steps = CASES[name]
    ours, _ = _run(ggrad, make, steps, opt)       # with AdamW, CyclicLR cycles beta1
    theirs, _ = _run(torch, make, steps, opt)
    assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("name, epochs", [
    ("warm_restarts", [0.5, 1.5, 2.25, 3, 7.9, 9.5, 20.1, 40]),
    ("multistep", [0, 3, 1, 6, 9, 10]), ("exponential", [2, 0, 5]), ("linear", [1, 7, 3]),
    ("polynomial", [3, 9, 1]), ("constant", [3, 5, 0]),
])
def test_stepping_to_an_epoch_matches_pytorch(name, epochs):
    make, _ = CASES[name]
    ours, _ = _run(ggrad, make, len(epochs), epochs=epochs)
    theirs, _ = _run(torch, make, len(epochs), epochs=epochs)   # PyTorch warns that epoch= is deprecated
    assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("name", ["sequential", "chained", "cyclic", "warm_restarts"])
def test_state_dict_resumes(name):
    make, steps = CASES[name]
    _, first = _run(ggrad, make, 5)
    state = first.state_dict()
    public = sorted(k for k in _run(torch, make, 5)[1].state_dict() if not k.startswith("_"))
    assert sorted(k for k in state if not k.startswith("_")) == public        # PyTorch's keys
    ours, second = _run(ggrad, make, 0)
    second.load_state_dict(state)
    assert second.get_last_lr() == first.get_last_lr()
    if hasattr(first, "_schedulers"):
        assert [s.last_epoch for s in second._schedulers] == [s.last_epoch for s in first._schedulers]


@pytest.mark.parametrize("make", [
    lambda m, o: m.ConstantLR(o, factor=1.5),
    lambda m, o: m.LinearLR(o, start_factor=0),
    lambda m, o: m.LinearLR(o, end_factor=2),
    lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=0),
    lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0),
    lambda m, o: m.CyclicLR(o, 0.1, 1.0, mode="bad"),
    lambda m, o: m.SequentialLR(o, [], milestones=[]),
    lambda m, o: m.SequentialLR(o, [m.ExponentialLR(o, 0.9)], milestones=[3]),
    lambda m, o: m.ChainedScheduler([]),
])
def test_bad_arguments_raise_as_pytorch(make):
    with pytest.raises(Exception) as theirs:
        _run(torch, make, 1)
    with pytest.raises(type(theirs.value)):
        _run(ggrad, make, 1)


def test_cyclic_needs_momentum_as_pytorch():
    for lib in (torch, ggrad):
        p = lib.zeros(1, requires_grad=True)
        with pytest.raises(ValueError, match="momentum or beta1"):
            lib.optim.lr_scheduler.CyclicLR(lib.optim.Adagrad([p]), 0.1, 1.0)


def test_the_names_are_on_pytorchs_path():
    names = ["MultiStepLR", "ExponentialLR", "CyclicLR", "CosineAnnealingWarmRestarts", "MultiplicativeLR",
             "LinearLR", "ConstantLR", "SequentialLR", "ChainedScheduler", "PolynomialLR", "LRScheduler"]
    assert all(getattr(sched, n) is getattr(optim.lr_scheduler, n) for n in names)
