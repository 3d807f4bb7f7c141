"""torch.special's i0, i0e, i1, i1e, ndtri, zeta and polygamma (ops/bessel.py, special_functions.py, hurwitz_zeta.py)
against PyTorch: values over float32's range, gradients, nan/inf and poles, the method forms and errors."""
import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")


def _compare(ours_fn, torch_fn, x, rtol, grad_rtol, floor=1e-30):
    """Values where PyTorch's are finite (relative to max(|value|, floor)) and equal non-finite ones; the
    gradients of the sum likewise."""
    t = torch.tensor(x, requires_grad=True)
    expected = torch_fn(t)
    expected.sum().backward()
    g = ggrad.tensor(x, requires_grad=True)
    got = ours_fn(g)
    got.sum().backward()
    for ours, theirs, tolerance in ((got.detach().numpy(), expected.detach().numpy(), rtol),
                                    (g.grad.numpy(), t.grad.numpy(), grad_rtol)):
        finite = np.isfinite(theirs)
        np.testing.assert_array_equal(ours[~finite], theirs[~finite])
        error = np.abs(ours[finite] - theirs[finite]) / np.maximum(np.abs(theirs[finite]), floor)
        assert error.max() <= tolerance, (x[finite][error.argmax()], ours[finite][error.argmax()],
                                          theirs[finite][error.argmax()])


BESSEL_X = np.concatenate([np.linspace(-95, 95, 1901), [0.0, 1e-4, -1e-4, 14.999, 15.0, 15.001, 88.7, np.inf,
                                                         -np.inf, np.nan]]).astype(np.float32)


@pytest.mark.parametrize("name", ["i0", "i0e", "i1", "i1e"])
def test_bessel_functions(name):
    ours = getattr(ggrad.special, name)
    theirs = getattr(torch.special, name)
    # gradients: i1's and i1e's subtract nearly equal terms far out (both sides lose digits there)
    _compare(ours, theirs, BESSEL_X[np.abs(BESSEL_X) < 40], rtol=2e-6, grad_rtol=5e-5, floor=1e-3)
    t = torch.tensor(BESSEL_X)
    np.testing.assert_allclose(ours(ggrad.tensor(BESSEL_X)).numpy(), theirs(t).numpy(), rtol=2e-6, atol=0)


def test_i0_top_level_method_and_integer_input():
    x = ggrad.tensor([0, 1, 2, 3])
    np.testing.assert_allclose(ggrad.i0(x).numpy(), torch.i0(torch.tensor([0, 1, 2, 3])).numpy(), rtol=1e-6)
    np.testing.assert_allclose(x.float().i0().numpy(), torch.tensor([0.0, 1, 2, 3]).i0().numpy(), rtol=1e-6)
    assert ggrad.i0(x).dtype == ggrad.float32


def test_ndtri_from_the_far_tails_to_the_centre():
    p = np.concatenate([np.logspace(-37.9, -1, 200), np.linspace(0.01, 0.99, 199), 1 - np.logspace(-7, -1, 40),
                        [0.0, 1.0, 0.5, -0.1, 1.1, np.nan]]).astype(np.float32)
    _compare(ggrad.special.ndtri, torch.special.ndtri, p, rtol=5e-6, grad_rtol=5e-5, floor=1e-1)


def test_zeta_values_poles_and_domain():
    s = np.array([2.0, 3.0, 0.5, 1.0, 2.0, 2.0, 1.5, 4.0, 10.0, 30.0, 2.0, 2.5, 3.0, 2.0, 2.5], dtype=np.float32)
    q = np.array([-1.5, -0.5, 1.0, 1.0, 0.0, -2.0, 0.1, 3.0, 0.5, 1.0, 1e-3, 100.0, -7.5, -8.5, -0.5],
                 dtype=np.float32)
    ours = ggrad.special.zeta(ggrad.tensor(s), ggrad.tensor(q)).numpy()
    theirs = torch.special.zeta(torch.tensor(s), torch.tensor(q)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=2e-5)   # q = -7.5: its terms cancel to 1e-3 of their size
    np.testing.assert_allclose(ggrad.special.zeta(2.0, ggrad.tensor([1.0, 2.0])).numpy(),
                               torch.special.zeta(2.0, torch.tensor([1.0, 2.0])).numpy(), rtol=1e-6)
    np.testing.assert_allclose(ggrad.special.zeta(ggrad.tensor([[2.0], [3.0]]), 1.0).numpy(),
                               torch.special.zeta(torch.tensor([[2.0], [3.0]]), 1.0).numpy(), rtol=1e-6)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_polygamma(n):
    x = np.concatenate([np.linspace(-8.9, 30, 600), [0.0, 1e-3, -0.5, 1e4]]).astype(np.float32)
    x = x[(x > 0) | (np.abs(x - np.round(x)) > 0.05)]   # next to the poles PyTorch's loses digits (mpmath:
    # polygamma(1, -5.0035057) = 81370.206; ggrad 81370.22, PyTorch 81367.2)
    _compare(lambda t: ggrad.polygamma(n, t), lambda t: torch.polygamma(n, t), x, rtol=1e-5, grad_rtol=1e-5,
             floor=1.0)


def test_polygamma_method_forms_and_errors():
    x = ggrad.tensor([0.5, 2.0])
    np.testing.assert_allclose(x.polygamma(2).numpy(), torch.tensor([0.5, 2.0]).polygamma(2).numpy(), rtol=1e-6)
    y = x.clone()
    y.polygamma_(1)
    np.testing.assert_allclose(y.numpy(), torch.polygamma(1, torch.tensor([0.5, 2.0])).numpy(), rtol=1e-6)
    np.testing.assert_allclose(ggrad.special.polygamma(1, x).numpy(), ggrad.polygamma(1, x).numpy())
    for lib in (torch, ggrad):
        with pytest.raises(RuntimeError):
            lib.polygamma(-1, lib.ones(2))


def test_polygamma_second_derivative_is_the_next_order():
    x = ggrad.tensor([0.7, 3.0], requires_grad=True)
    (g,) = ggrad.autograd.grad(ggrad.polygamma(1, x).sum(), x, create_graph=True)
    (h,) = ggrad.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), torch.polygamma(3, torch.tensor([0.7, 3.0])).numpy(), rtol=1e-5)
