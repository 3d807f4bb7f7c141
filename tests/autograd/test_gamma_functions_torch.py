"""lgamma and digamma (functions and Tensor methods) against PyTorch: values over the whole float32 range
(reflection, recurrence and series regions, near their zeros and poles, inf and nan), integer inputs,
gradients (digamma, trigamma) and second derivatives."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

_X = np.concatenate([np.linspace(-20, 40, 6001), np.geomspace(1e-30, 1e30, 300),
                     0.3 - np.geomspace(1e-30, 1e6, 300), np.linspace(0.9, 2.1, 241), [1.4616321]]).astype(np.float32)


@pytest.mark.parametrize("name", ["lgamma", "digamma"])
def test_values_within_float32_of_pytorchs(name):
    ours = getattr(ggrad, name)(ggrad.tensor(_X)).numpy()
    exact = getattr(torch, name)(torch.tensor(_X.astype(np.float64))).numpy()
    theirs = getattr(torch, name)(torch.tensor(_X)).numpy()
    finite = np.isfinite(exact) & (np.abs(_X) < 1e6)
    error = np.abs(ours[finite] - exact[finite]) / np.maximum(1, np.abs(exact[finite]))
    assert error.max() < 1e-6, (error.max(), _X[finite][error.argmax()])
    np.testing.assert_allclose(ours, theirs, rtol=3e-6, atol=3e-6)


@pytest.mark.parametrize("name", ["lgamma", "digamma"])
def test_poles_infinities_nan_and_integers(name):
    x = np.array([0.0, -1.0, -2.0, -7.0, -3e7, np.inf, -np.inf, np.nan, 3e38, 1e-38], np.float32)
    np.testing.assert_array_equal(getattr(ggrad, name)(ggrad.tensor(x)).numpy(),
                                  getattr(torch, name)(torch.tensor(x)).numpy())
    ints = ggrad.tensor([1, 2, 5, 10])
    ours = getattr(ints, name)()
    assert ours.dtype == ggrad.float32
    np.testing.assert_allclose(ours.numpy(), getattr(torch.tensor([1, 2, 5, 10]), name)().numpy(), rtol=1e-6,
                               atol=1e-6)


@pytest.mark.parametrize("name", ["lgamma", "digamma"])
def test_gradients_and_second_derivatives(name):
    x = np.array([-3.7, -0.3, 0.1, 0.7, 1.5, 2.2, 5.5, 7.9, 8.1, 30.0, 1000.0], np.float32)
    g, t = ggrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    gy, ty = getattr(ggrad, name)(g), getattr(torch, name)(t)
    (gg,) = ggrad.autograd.grad(gy.sum(), g, create_graph=True)
    (tg,) = torch.autograd.grad(ty.sum(), t, create_graph=True)
    np.testing.assert_allclose(gg.detach().numpy(), tg.detach().numpy(), rtol=3e-6, atol=2e-6)
    gg.sum().backward()
    if name == "lgamma":   # digamma's second derivative (tetragamma) is PyTorch's polygamma(2); not compared
        tg.sum().backward()
        np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-5)
