"""The activation layers of issue 15 against PyTorch's: output, input gradient, parameter gradient, repr."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as gnn

torch = pytest.importorskip("torch")

LAYERS = [("SELU", (), ()), ("CELU", (0.5,), ()), ("Mish", (), ()), ("Hardswish", (), ()),
          ("Hardsigmoid", (), ()), ("Hardtanh", (-0.5, 2.0), ()), ("ReLU6", (), ()), ("LogSigmoid", (), ()),
          ("GLU", (1,), ()), ("Softsign", (), ()), ("Tanhshrink", (), ()), ("Softplus", (2.0, 3.0), ()),
          ("ELU", (0.4,), ()), ("PReLU", (), ("weight",)), ("PReLU", (4, 0.1), ("weight",)),
          ("Hardshrink", (), ()), ("Hardshrink", (3.0,), ()), ("Softshrink", (1.5,), ()), ("Softmin", (1,), ())]


@pytest.mark.parametrize("name,args,params", LAYERS, ids=[f"{n}{a}" for n, a, _ in LAYERS])
def test_layer_matches_pytorch(name, args, params):
    x = np.random.default_rng(0).uniform(-4, 4, size=(3, 4, 6)).astype(np.float32)
    x[0, 0, :3] = [0.0, 3.0, -3.0]   # kinks
    theirs, ours = getattr(torch.nn, name)(*args), getattr(gnn, name)(*args)
    tx, gx = torch.tensor(x, requires_grad=True), ggrad.tensor(x, requires_grad=True)
    ty, gy = theirs(tx), ours(gx)
    w = np.random.default_rng(1).standard_normal(tuple(ty.shape)).astype(np.float32)
    (ty * torch.tensor(w)).sum().backward()
    (gy * ggrad.tensor(w)).sum().backward()
    np.testing.assert_allclose(gy.numpy(), ty.detach().numpy(), atol=1e-5, rtol=1e-4)
    np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), atol=1e-5, rtol=1e-4)
    for p in params:
        np.testing.assert_allclose(getattr(ours, p).grad.numpy(), getattr(theirs, p).grad.numpy(), atol=1e-4,
                                   rtol=1e-4)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]


def test_hardtanh_rejects_min_above_max():
    with pytest.raises(ValueError, match="min_val"):
        gnn.Hardtanh(1.0, -1.0)
