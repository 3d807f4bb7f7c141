"""Lazy modules against PyTorch's: the size read from the first forward's input, the module they become
(class, sizes, parameter and buffer shapes, state_dict keys), their output from the built parameters, hooks
kept, and training continuing on the built parameters."""
import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")


CASES = [
    ("LazyLinear", (5,), {}, (4, 3, 7)),
    ("LazyLinear", (2,), {"bias": False}, (6,)),
    ("LazyConv1d", (4, 3), {"padding": 1}, (2, 3, 9)),
    ("LazyConv1d", (4, 3), {}, (3, 9)),
    ("LazyConv2d", (4, (3, 2)), {"stride": 2, "groups": 1}, (2, 3, 8, 7)),
    ("LazyConv3d", (2, 2), {}, (1, 3, 4, 5, 4)),
    ("LazyConvTranspose1d", (4, 3), {"stride": 2}, (2, 3, 5)),
    ("LazyConvTranspose2d", (2, 3), {}, (2, 3, 4, 4)),
    ("LazyConvTranspose3d", (2, 2), {}, (1, 3, 2, 3, 2)),
    ("LazyBatchNorm1d", (), {}, (4, 6)),
    ("LazyBatchNorm1d", (), {"momentum": 0.3}, (4, 6, 5)),
    ("LazyBatchNorm2d", (), {"affine": False}, (2, 3, 4, 4)),
    ("LazyBatchNorm3d", (), {}, (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", (), {"affine": True}, (2, 3, 5)),
    ("LazyInstanceNorm2d", (), {}, (2, 3, 4, 4)),
    ("LazyInstanceNorm3d", (), {"track_running_stats": True}, (2, 3, 2, 3, 2)),
]


@pytest.mark.parametrize("name, args, kwargs, shape", CASES)
def test_lazy_module_becomes_pytorchs(name, args, kwargs, shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    theirs = getattr(torch.nn, name)(*args, **kwargs)
    ours = getattr(ggrad.nn, name)(*args, **kwargs)
    assert ours.has_uninitialized_params() and theirs.has_uninitialized_params()
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert all(isinstance(p, ggrad.nn.parameter.UninitializedParameter) for p in ours.parameters())
    expected = theirs(torch.tensor(x))
    out = ours(ggrad.tensor(x))
    assert type(ours).__name__ == type(theirs).__name__ == name[4:]
    assert isinstance(ours, getattr(ggrad.nn, name[4:]))
    their_state = theirs.state_dict()
    our_state = ours.state_dict()
    assert list(our_state) == [k for k in their_state if k != "num_batches_tracked" or k in our_state]
    for key, value in our_state.items():
        assert tuple(value.shape) == tuple(their_state[key].shape), key
    ours.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in their_state.items() if k in our_state})
    np.testing.assert_allclose(ours(ggrad.tensor(x)).detach().numpy(), expected.detach().numpy(), rtol=1e-4,
                               atol=1e-5)
    assert tuple(out.shape) == tuple(expected.shape)


def test_hooks_and_training_carry_over():
    model = ggrad.nn.Sequential(ggrad.nn.LazyLinear(3), ggrad.nn.ReLU(), ggrad.nn.LazyLinear(1))
    seen = []
    model[0].register_forward_hook(lambda module, inputs, output: seen.append(tuple(output.shape)))
    model.eval()
    x = ggrad.randn(5, 4)
    model(x)   # the dry run
    assert seen == [(5, 3)] and not model[0].training
    assert model[0].in_features == 4 and model[2].in_features == 3
    model.train()
    opt = ggrad.optim.SGD(model.parameters(), lr=0.1)
    before = model[0].weight.detach().numpy().copy()
    model(x).pow(2).mean().backward()
    opt.step()
    assert not np.allclose(before, model[0].weight.detach().numpy())
    assert "LazyLinear" not in repr(model) and "Linear(in_features=4, out_features=3" in repr(model)


def test_an_optimizer_made_before_the_first_forward_trains_the_built_parameters():
    """PyTorch's lazy parameters materialise in place: an optimizer made first holds the trained objects."""
    x = np.linspace(-1, 1, 20, dtype=np.float32).reshape(5, 4)
    models, optimizers, losses = [], [], []
    for lib in (torch, ggrad):
        model = lib.nn.Sequential(lib.nn.LazyLinear(3), lib.nn.Tanh(), lib.nn.LazyLinear(2, bias=False))
        before = list(model.parameters())
        optimizers.append(lib.optim.SGD(model.parameters(), lr=0.5))
        model(lib.tensor(x))
        after = list(model.parameters())
        assert len(before) == len(after) == 3 and all(a is b for a, b in zip(before, after))
        assert all(type(p) is lib.nn.Parameter for p in after)
        models.append(model)
    models[1].load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in models[0].state_dict().items()})
    for lib, model, opt in ((torch, models[0], optimizers[0]), (ggrad, models[1], optimizers[1])):
        trace = []
        for _ in range(3):
            opt.zero_grad()
            loss = model(lib.tensor(x)).pow(2).mean()
            loss.backward()
            opt.step()
            trace.append(loss.item())
        losses.append(trace)
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    assert losses[0][-1] < losses[0][0]


def test_lazy_conv_refuses_an_input_of_the_wrong_rank():
    with pytest.raises(ValueError):
        ggrad.nn.LazyConv2d(4, 3)(ggrad.ones(3, 4))
