"""torch.func.functional_call / nn.utils.stateless.functional_call against PyTorch: a forward with replacement
parameters and buffers (gradients reaching the replacements, not the module's own), a MAML inner step, tied
weights, strict mode, the module restored after an error, and PyTorch's errors."""
import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")


def _model(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.Tanh(), lib.nn.Linear(4, 2))


def _same_weights(ours, theirs):
    ours.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})


def test_maml_inner_step_matches_pytorch():
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    results = []
    theirs = _model(torch)
    ours = _model(ggrad)
    _same_weights(ours, theirs)
    for lib, model in ((ggrad, ours), (torch, theirs)):
        params = dict(model.named_parameters())
        loss = lib.func.functional_call(model, params, (lib.tensor(x),)).pow(2).mean()
        grads = lib.autograd.grad(loss, list(params.values()), create_graph=True)
        fast = {name: p - 0.1 * g for (name, p), g in zip(params.items(), grads)}
        outer = lib.func.functional_call(model, fast, lib.tensor(x)).pow(2).mean()
        outer.backward()
        results.append([outer.detach().numpy()] + [p.grad.numpy() for p in params.values()] +
                       [model.state_dict()["1.running_mean"].numpy()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_replacements_get_the_gradient_and_the_module_is_restored():
    for lib in (ggrad, torch):
        model = lib.nn.Linear(2, 1)
        weight = lib.ones(1, 2, requires_grad=True)
        out = lib.nn.utils.stateless.functional_call(model, {"weight": weight}, (lib.tensor([[1.0, 2.0]]),))
        out.sum().backward()
        assert model.weight.grad is None and weight.grad is not None
        assert isinstance(model.weight, lib.nn.Parameter)
        with pytest.raises(RuntimeError):
            lib.func.functional_call(model, {"weight": lib.ones(3, 3)}, (lib.ones(1, 2),))
        assert isinstance(model.weight, lib.nn.Parameter) and tuple(model.weight.shape) == (1, 2)


def test_tied_weights_strict_and_errors():
    for lib in (ggrad, torch):
        model = lib.nn.Sequential(lib.nn.Linear(2, 2, bias=False), lib.nn.Linear(2, 2, bias=False))
        model[1].weight = model[0].weight
        eye = lib.eye(2)
        x = lib.tensor([[1.0, -2.0]])
        np.testing.assert_allclose(lib.func.functional_call(model, {"0.weight": eye}, (x,)).detach().numpy(),
                                   [[1.0, -2.0]])
        untied = lib.func.functional_call(model, {"0.weight": eye}, (x,), tie_weights=False)
        assert not np.allclose(untied.detach().numpy(), [[1.0, -2.0]])
        lib.func.functional_call(model, {"0.weight": eye}, (x,), strict=True)   # the tied name counts
        with pytest.raises(RuntimeError):
            lib.func.functional_call(model, {"0.weight": eye}, (x,), strict=True, tie_weights=False)
        with pytest.raises(ValueError):
            lib.func.functional_call(model, ({"0.weight": eye}, {"0.weight": eye}), (x,))
