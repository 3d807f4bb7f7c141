"""nn.utils.spectral_norm against PyTorch's, from the same weight and singular-vector estimates: the normalised
weight, the updated u and v, the output and the gradients over several training steps; eval mode, state_dict
names, removal and errors."""
import numpy as np
import pytest

import ggrad
from torch_parity_util import copy_weights, train_side_by_side

torch = pytest.importorskip("torch")


def _pair(make_ours, make_theirs, **kwargs):
    theirs = torch.nn.utils.spectral_norm(make_theirs(), **kwargs)
    ours = ggrad.nn.utils.spectral_norm(make_ours(), **kwargs)
    return copy_weights(ours, theirs)


@pytest.mark.parametrize("layer, shape, kwargs", [
    ("Linear", (4, 6), {}), ("Conv2d", (2, 3, 5, 5), {"n_power_iterations": 3}),
    ("ConvTranspose2d", (2, 3, 4, 4), {}), ("Linear", (5, 6), {"name": "weight", "eps": 1e-6})])
def test_training_steps_match_pytorch(layer, shape, kwargs):
    args = {"Linear": (6, 3), "Conv2d": (3, 4, 3), "ConvTranspose2d": (3, 2, 3)}[layer]
    ours, theirs = _pair(lambda: getattr(ggrad.nn, layer)(*args), lambda: getattr(torch.nn, layer)(*args), **kwargs)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    train_side_by_side(ours, theirs, x, lambda module, y: (
        y.detach().numpy(), module.weight_orig.grad.numpy(), module.weight_u.numpy(), module.weight_v.numpy(),
        module.weight.detach().numpy()))


def test_eval_mode_keeps_u_and_v_and_removal():
    ours, theirs = _pair(lambda: ggrad.nn.Linear(5, 4), lambda: torch.nn.Linear(5, 4))
    ours.eval()
    theirs.eval()
    u = ours.weight_u.numpy().copy()
    x = np.ones((2, 5), np.float32)
    np.testing.assert_allclose(ours(ggrad.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ours.weight_u.numpy(), u)
    for module in (ours, theirs):
        (ggrad if module is ours else torch).nn.utils.remove_spectral_norm(module)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_errors_as_pytorchs():
    for lib in (torch, ggrad):
        with pytest.raises(RuntimeError):
            lib.nn.utils.spectral_norm(lib.nn.utils.spectral_norm(lib.nn.Linear(2, 2)))
        with pytest.raises(ValueError):
            lib.nn.utils.remove_spectral_norm(lib.nn.Linear(2, 2))
        with pytest.raises(ValueError):
            lib.nn.utils.spectral_norm(lib.nn.Linear(2, 2), n_power_iterations=0)
