"""igamma / igammac (the regularized incomplete gamma functions) and Gamma.cdf against PyTorch: values over
a wide grid (tails kept relatively), edge values, large concentrations, gradients (x as PyTorch's, a against a
float64 central difference of PyTorch's), broadcasting and dtypes."""
import numpy as np
import pytest

import ggrad
import ggrad.distributions as D

torch = pytest.importorskip("torch")
TD = torch.distributions

_A = np.geomspace(1e-3, 3e4, 41).astype(np.float32)
_X = np.concatenate([[0.0], np.geomspace(1e-6, 1e5, 61)]).astype(np.float32)


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_values_over_a_grid_as_pytorchs_float64(name):
    a, x = np.meshgrid(_A, _X, indexing="ij")
    ours = getattr(ggrad, name)(ggrad.tensor(a), ggrad.tensor(x)).numpy()
    exact = getattr(torch, name)(torch.tensor(a, dtype=torch.float64), torch.tensor(x, dtype=torch.float64)).numpy()
    assert ours.dtype == np.float32
    representable = exact > 1e-37   # float32's normal range: below it both round to subnormals or 0
    np.testing.assert_allclose(ours[representable], exact[representable], rtol=3e-6)
    assert np.all(ours[~representable] < 2e-37)


def test_edge_values_are_pytorchs():
    inf, nan = float("inf"), float("nan")
    a = [0.0, 0.0, 0.0, 1.0, 2.0, inf, inf, 1.0, nan, 1.0, -1.0, 5.0]
    x = [0.0, 1.0, inf, 0.0, inf, 1.0, inf, nan, 1.0, -0.5, 0.0, 1e-30]
    for name in ("igamma", "igammac"):
        ours = getattr(ggrad, name)(ggrad.tensor(a), ggrad.tensor(x)).numpy()
        theirs = getattr(torch, name)(torch.tensor(a), torch.tensor(x)).numpy()
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-37, equal_nan=True)


def test_tiny_concentration_upper_tail():
    """Q(a, 1) -> a E1(1) as a -> 0 (Gamma(a, 1) -> E1(1), Gamma(a) ~ 1/a). PyTorch's 7.97e-31 for a = 1e-30
    (float64 too) is a Ein(1), which leaves out Gamma(a)'s own -euler_gamma term."""
    q = ggrad.igammac(ggrad.tensor([1e-30, 1e-20]), ggrad.tensor([1.0, 1.0])).numpy()
    np.testing.assert_allclose(q, 0.21938393439552 * np.array([1e-30, 1e-20]), rtol=1e-6)


@pytest.mark.parametrize("a", [1e5, 1e7])
def test_large_concentrations_near_the_mean(a):
    x = (a + np.sqrt(a) * np.linspace(-6, 6, 25)).astype(np.float32)
    ours = ggrad.igamma(ggrad.full((25,), a), ggrad.tensor(x)).numpy()
    exact = torch.igamma(torch.full((25,), a, dtype=torch.float64), torch.tensor(x, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(ours, exact, rtol=1e-4, atol=2e-7)


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_gradients(name):
    a = np.array([[0.3], [1.0], [2.5], [40.0]], np.float32)
    x = np.array([0.05, 0.9, 3.0, 45.0], np.float32)
    ga, gx = ggrad.tensor(a, requires_grad=True), ggrad.tensor(x, requires_grad=True)
    getattr(ga, name)(gx).sum().backward()
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    getattr(torch, name)(torch.tensor(a, dtype=torch.float64), tx).sum().backward()
    np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), rtol=2e-5)
    step = 1e-6 * a.astype(np.float64)
    fn = getattr(torch, name)
    plus = fn(torch.tensor(a + step), torch.tensor(x, dtype=torch.float64).expand(4, 4)).numpy()
    minus = fn(torch.tensor(a - step), torch.tensor(x, dtype=torch.float64).expand(4, 4)).numpy()
    np.testing.assert_allclose(ga.grad.numpy()[:, 0], ((plus - minus) / (2 * step)).sum(1), rtol=1e-4, atol=1e-7)


def test_dtypes_and_bad_arguments():
    half = ggrad.igamma(ggrad.tensor([1.0, 2.0], dtype=ggrad.float16), ggrad.tensor([1.0, 2.0], dtype=ggrad.float16))
    assert half.dtype == ggrad.float16
    np.testing.assert_allclose(half.numpy(), [0.632, 0.594], rtol=1e-3)
    mixed = ggrad.igamma(ggrad.tensor([2.0], dtype=ggrad.float16), ggrad.tensor([1.0]))
    assert mixed.dtype == ggrad.float32
    for lib in (ggrad, torch):
        with pytest.raises(NotImplementedError):
            lib.igamma(lib.tensor([1, 2]), lib.tensor([1, 2]))
        with pytest.raises(TypeError):
            lib.igamma(lib.tensor([1.0]), 2.0)


def test_gamma_cdf_and_its_gradients_match_pytorchs():
    conc, rate = np.array([0.5, 2.0, 9.0], np.float32), np.array([1.5, 0.7, 2.0], np.float32)
    value = np.array([[0.1, 3.0, 4.0], [2.0, 0.01, 6.5]], np.float32)
    results = {}
    for lib, dist in ((ggrad, D), (torch, TD)):
        r, v = lib.tensor(rate, requires_grad=True), lib.tensor(value, requires_grad=True)
        cdf = dist.Gamma(lib.tensor(conc), r).cdf(v)
        (cdf * lib.tensor([[1.0, -2.0, 0.5]])).sum().backward()
        results[lib] = [cdf.detach().numpy(), r.grad.numpy(), v.grad.numpy()]
    for ours, theirs in zip(results[ggrad], results[torch]):
        np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=1e-7)
    with pytest.raises(ValueError, match="GreaterThanEq"):
        D.Gamma(2.0, 1.0).cdf(ggrad.tensor([-1.0]))


def test_gamma_cdf_gives_the_concentration_a_gradient_where_pytorch_has_none():
    a = ggrad.tensor([0.7, 3.0], requires_grad=True)
    D.Gamma(a, 2.0).cdf(ggrad.tensor([0.4, 1.9])).sum().backward()
    step = 1e-6
    value = torch.tensor([0.4, 1.9], dtype=torch.float64) * 2.0
    at = torch.tensor([0.7, 3.0], dtype=torch.float32).double()
    want = (torch.igamma(at + step, value) - torch.igamma(at - step, value)) / (2 * step)
    np.testing.assert_allclose(a.grad.numpy(), want.numpy(), rtol=1e-4)
