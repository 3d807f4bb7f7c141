"""nn.utils.parametrize and nn.utils.parametrizations (weight_norm, spectral_norm) against PyTorch: state-dict
keys, values and gradients over training steps from the same state, assignment through right_inverse, chains,
caching, removal and errors."""
import numpy as np
import pytest

import ggrad
from torch_parity_util import copy_weights, train_side_by_side

torch = pytest.importorskip("torch")


class _Symmetric:
    """X -> triu(X) + triu(X, 1)^T, with PyTorch's module shape, for either library."""

    @staticmethod
    def make(lib):
        class Symmetric(lib.nn.Module):
            def forward(self, x):
                return x.triu() + x.triu(1).transpose(0, 1)

            def right_inverse(self, a):
                return a.triu()
        return Symmetric()


@pytest.mark.parametrize("which", ["weight_norm", "spectral_norm"])
@pytest.mark.parametrize("layer, shape", [("Linear", (4, 6)), ("Conv1d", (2, 6, 7)), ("ConvTranspose1d", (2, 6, 5))])
def test_parametrizations_train_as_pytorchs(which, layer, shape):
    args = {"Linear": (6, 3), "Conv1d": (6, 4, 3), "ConvTranspose1d": (6, 2, 3)}[layer]
    theirs = getattr(torch.nn.utils.parametrizations, which)(getattr(torch.nn, layer)(*args))
    ours = getattr(ggrad.nn.utils.parametrizations, which)(getattr(ggrad.nn, layer)(*args))
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    assert type(ours).__name__ == type(theirs).__name__ == f"Parametrized{layer}"
    copy_weights(ours, theirs)
    assert len(list(ours.parameters())) == len(list(theirs.parameters()))
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    train_side_by_side(ours, theirs, x, lambda module, y: (
        [y.detach().numpy(), module.weight.detach().numpy()] + [p.grad.numpy() for p in module.parameters()]
        + [v.numpy().copy() for k, v in sorted(module.state_dict().items())]))


def test_a_user_parametrization_chain_assignment_caching_and_removal():
    results = []
    for lib in (ggrad, torch):
        lib.manual_seed(0)
        model = lib.nn.Linear(3, 3)
        model.load_state_dict({"weight": lib.tensor(np.arange(9, dtype=np.float32).reshape(3, 3)),
                               "bias": lib.zeros(3)})
        lib.nn.utils.parametrize.register_parametrization(model, "weight", _Symmetric.make(lib))
        assert lib.nn.utils.parametrize.is_parametrized(model, "weight")
        assert not lib.nn.utils.parametrize.is_parametrized(model, "bias")
        symmetric = model.weight.detach().numpy()
        model.weight = lib.tensor(np.ones((3, 3), np.float32) * 2)   # through right_inverse
        assigned = model.weight.detach().numpy()
        with lib.nn.utils.parametrize.cached():
            assert model.weight is model.weight
        lib.nn.utils.parametrize.remove_parametrizations(model, "weight")
        assert not lib.nn.utils.parametrize.is_parametrized(model)
        results.append((symmetric, assigned, model.weight.detach().numpy(), sorted(model.state_dict()),
                        type(model).__name__, isinstance(model.weight, lib.nn.Parameter)))
    for ours, theirs in zip(*results):
        if isinstance(ours, np.ndarray):
            np.testing.assert_array_equal(ours, theirs)
        else:
            assert ours == theirs


def test_errors_as_pytorchs():
    for lib in (ggrad, torch):
        with pytest.raises(ValueError):
            lib.nn.utils.parametrize.register_parametrization(lib.nn.Linear(2, 2), "nothing", _Symmetric.make(lib))
        with pytest.raises(ValueError):
            lib.nn.utils.parametrize.remove_parametrizations(lib.nn.Linear(2, 2), "weight")
