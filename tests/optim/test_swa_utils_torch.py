"""torch.optim.swa_utils' path (`from ggrad.optim.swa_utils import ...`): AveragedModel (SWA's running mean,
EMA by multi_avg_fn and avg_fn, buffers averaged or followed), update_bn and SWALR against PyTorch."""

import copy

import numpy as np
import pytest

import ggrad
from ggrad.optim.swa_utils import SWALR, AveragedModel, get_ema_avg_fn, get_ema_multi_avg_fn, update_bn

torch = pytest.importorskip("torch")


def _models():
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    ours = ggrad.nn.Sequential(ggrad.nn.Linear(3, 4), ggrad.nn.BatchNorm1d(4), ggrad.nn.Linear(4, 2))
    ours.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


@pytest.mark.parametrize("how", ["swa", "ema_multi", "ema_avg", "swa_buffers"])
def test_averaged_model_follows_pytorchs(how):
    ours, theirs = _models()
    kwargs = {"swa": {}, "ema_multi": {"multi_avg_fn": "ema"}, "ema_avg": {"avg_fn": "ema"},
              "swa_buffers": {"use_buffers": True}}[how]
    averaged = {}
    for lib, model, swa_utils in ((ggrad, ours, ggrad.optim.swa_utils), (torch, theirs, torch.optim.swa_utils)):
        options = dict(kwargs)
        if "multi_avg_fn" in options:
            options["multi_avg_fn"] = swa_utils.get_ema_multi_avg_fn(0.9)
        if "avg_fn" in options:
            options["avg_fn"] = swa_utils.get_ema_avg_fn(0.8)
        avg = swa_utils.AveragedModel(model, **options)
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        x = lib.tensor(np.random.default_rng(1).standard_normal((6, 3)).astype(np.float32))
        for _ in range(4):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
            avg.update_parameters(model)
        averaged[lib] = {k: v.detach().numpy().copy() for k, v in avg.state_dict().items()}   # torch: views
        averaged[lib]["out"] = avg(x).detach().numpy()
    assert sorted(averaged[ggrad]) == sorted(averaged[torch])
    for key, value in averaged[torch].items():
        np.testing.assert_allclose(averaged[ggrad][key], value, rtol=1e-5, atol=1e-6, err_msg=key)


def test_update_bn_and_deepcopy_keeps_parameters():
    ours, theirs = _models()
    data = np.random.default_rng(2).standard_normal((12, 3)).astype(np.float32) * 3 + 1
    update_bn([(ggrad.tensor(data[:5]), 0), (ggrad.tensor(data[5:]), 1)], ours)
    torch.optim.swa_utils.update_bn([(torch.tensor(data[:5]), 0), (torch.tensor(data[5:]), 1)], theirs)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(getattr(ours[1], name).numpy(), getattr(theirs[1], name).numpy(), rtol=1e-5)
    assert ours[1].momentum == 0.1 and ours.training
    twin = copy.deepcopy(ours)
    assert all(isinstance(p, ggrad.nn.Parameter) for p in twin.parameters()) and len(list(twin.parameters())) == 6


@pytest.mark.parametrize("strategy, epochs", [("cos", 3), ("linear", 4), ("cos", 0)])
def test_swalr_trajectory(strategy, epochs):
    trajectories = []
    for lib, make in ((ggrad, SWALR), (torch, torch.optim.swa_utils.SWALR)):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=0.5)
        scheduler = make(opt, swa_lr=0.05, anneal_epochs=epochs, anneal_strategy=strategy)
        lrs = []
        for _ in range(6):
            opt.step()
            scheduler.step()
            lrs.append(opt.param_groups[0]["lr"])
        trajectories.append(lrs)
    np.testing.assert_allclose(trajectories[0], trajectories[1], rtol=1e-12)
    with pytest.raises(ValueError, match="anneal_strategy"):
        SWALR(ggrad.optim.SGD([ggrad.nn.Parameter(ggrad.ones(1))], lr=0.1), 0.01, anneal_strategy="exp")


def test_averaging_rules_refuse_bad_arguments():
    with pytest.raises(ValueError, match="decay"):
        get_ema_multi_avg_fn(1.5)
    with pytest.raises(ValueError, match="decay"):
        get_ema_avg_fn(-0.1)
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn"):
        AveragedModel(ggrad.nn.Linear(1, 1), avg_fn=get_ema_avg_fn(), multi_avg_fn=get_ema_multi_avg_fn())
