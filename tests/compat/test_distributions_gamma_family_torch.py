"""Gamma, Beta and MultivariateNormal against torch.distributions: log_prob, entropy, mean, mode, variance,
covariance/precision/scale_tril, KL divergences, gradients of all of them in the parameters; draws reproducible
under manual_seed, with the right distribution (a Kolmogorov-Smirnov distance against the CDF, fixed seeds),
implicit reparameterized gradients against PyTorch's `_standard_gamma_grad`; linalg.cholesky and
solve_triangular against torch.linalg; validation errors as PyTorch's."""

import math

import numpy as np
import pytest

import ggrad
from ggrad import distributions as D
from ggrad.autograd.ops.incomplete_gamma import lower_regularized_gamma as _lower_regularized
from ggrad.distributions.gamma import standard_gamma_grad

torch = pytest.importorskip("torch")
TD = torch.distributions

A = np.array([0.3, 1.0, 2.5, 9.0], np.float32)
B = np.array([1.0, 2.0, 0.5, 4.0], np.float32)


def _same(ours, theirs, rtol=2e-5, atol=2e-6):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol)


def _pair(values):
    return ggrad.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)


def _check_gradients(ours, theirs, pairs, rtol=1e-4, atol=1e-5):
    ours.sum().backward()
    theirs.sum().backward()
    for g, t in pairs:
        np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", ["Gamma", "Beta"])
def test_densities_moments_and_their_gradients(name):
    (ga, ta), (gb, tb) = _pair(A), _pair(B)
    ours, theirs = getattr(D, name)(ga, gb), getattr(TD, name)(ta, tb)
    x = np.array([[0.2, 0.5, 0.9, 0.05], [0.7, 0.01, 0.3, 0.99]], np.float32)
    for prop in ("mean", "variance", "stddev", "mode"):
        _same(getattr(ours, prop), getattr(theirs, prop))
    _same(ours.entropy(), theirs.entropy())
    lp_ours, lp_theirs = ours.log_prob(ggrad.tensor(x)), theirs.log_prob(torch.tensor(x))
    _same(lp_ours, lp_theirs)
    _check_gradients(lp_ours + ours.entropy(), lp_theirs + theirs.entropy(), [(ga, ta), (gb, tb)])
    assert ours.batch_shape == tuple(theirs.batch_shape) and ours.event_shape == tuple(theirs.event_shape)


def test_gamma_at_zero_and_repr():
    ours, theirs = D.Gamma(ggrad.tensor([1.0, 2.0]), 1.5), TD.Gamma(torch.tensor([1.0, 2.0]), 1.5)
    _same(ours.log_prob(ggrad.tensor([0.0, 0.0])), theirs.log_prob(torch.tensor([0.0, 0.0])))
    assert repr(D.Gamma(2.0, 1.0)) == repr(TD.Gamma(torch.tensor(2.0), 1.0))


@pytest.mark.parametrize("name", ["Gamma", "Beta"])
def test_kl_divergence_and_gradient(name):
    (ga, ta), (gb, tb) = _pair(A), _pair(B)
    p_ours, p_theirs = getattr(D, name)(ga, gb), getattr(TD, name)(ta, tb)
    q_ours = getattr(D, name)(ggrad.tensor(B[::-1].copy()), ggrad.tensor(A[::-1].copy()))
    q_theirs = getattr(TD, name)(torch.tensor(B[::-1].copy()), torch.tensor(A[::-1].copy()))
    ours, theirs = D.kl_divergence(p_ours, q_ours), TD.kl_divergence(p_theirs, q_theirs)
    _same(ours, theirs, rtol=5e-5, atol=1e-5)
    _check_gradients(ours, theirs, [(ga, ta), (gb, tb)], rtol=2e-4, atol=2e-5)


def test_lower_regularized_gamma_and_implicit_gradient_match_torch():
    a = np.array([0.05, 0.3, 1.0, 2.5, 7.0, 30.0, 0.7, 4.0, 100.0])
    x = np.array([1e-8, 0.2, 1.0, 3.0, 5.0, 28.0, 2.5, 0.5, 110.0])
    np.testing.assert_allclose(_lower_regularized(a, x), torch.special.gammainc(torch.tensor(a), torch.tensor(x)),
                               rtol=1e-8, atol=1e-14)
    np.testing.assert_allclose(standard_gamma_grad(a, x), torch._standard_gamma_grad(torch.tensor(a),
                                                                                     torch.tensor(x)), rtol=2e-4)


def _ks_distance(draws, cdf):
    draws = np.sort(draws)
    n = len(draws)
    values = cdf(draws)
    return max(np.max(np.arange(1, n + 1) / n - values), np.max(values - np.arange(n) / n))


@pytest.mark.parametrize("concentration, rate", [(0.2, 1.0), (0.9, 3.0), (1.0, 0.5), (4.5, 2.0), (50.0, 1.0)])
def test_gamma_draws_follow_the_distribution_and_repeat_under_a_seed(concentration, rate):
    ggrad.manual_seed(123)
    draws = D.Gamma(concentration, rate).sample((4000,)).numpy()
    ggrad.manual_seed(123)
    again = D.Gamma(concentration, rate).sample((4000,)).numpy()
    assert np.array_equal(draws, again) and draws.shape == (4000,) and (draws > 0).all()
    a = np.full(len(draws), concentration, np.float64)
    distance = _ks_distance(draws.astype(np.float64), lambda v: _lower_regularized(a, v * rate))
    assert distance < 1.63 / math.sqrt(len(draws)), distance    # the 1% critical value


@pytest.mark.parametrize("a, b", [(0.5, 0.5), (2.0, 5.0), (0.3, 3.0)])
def test_beta_draws_follow_the_distribution(a, b):
    ggrad.manual_seed(7)
    draws = D.Beta(a, b).sample((4000,)).numpy().astype(np.float64)
    exact = TD.Beta(torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64))
    edge = np.geomspace(1e-12, 0.5, 20000)
    grid = np.unique(np.concatenate([edge, 1 - edge]))           # fine where the density is singular
    density = exact.log_prob(torch.tensor(grid)).exp().numpy()
    cdf = np.concatenate([[0], np.cumsum((density[1:] + density[:-1]) / 2 * np.diff(grid))])
    distance = _ks_distance(draws, lambda v: np.interp(v, grid, cdf / cdf[-1]))
    assert distance < 1.63 / math.sqrt(len(draws)), distance


def test_reparameterized_gradients_are_the_implicit_ones():
    """d draw / d concentration equals PyTorch's implicit gradient at the same (concentration, draw); the rate's
    gradient is -draw / rate; Beta's gradients flow to both concentrations."""
    ggrad.manual_seed(3)
    a = ggrad.tensor([0.4, 1.5, 6.0], requires_grad=True)
    rate = ggrad.tensor([2.0, 0.5, 1.0], requires_grad=True)
    draws = D.Gamma(a, rate).rsample()
    draws.sum().backward()
    standard = draws.detach().numpy().astype(np.float64) * rate.detach().numpy()
    want = torch._standard_gamma_grad(torch.tensor(a.detach().numpy(), dtype=torch.float64),
                                      torch.tensor(standard)).numpy() / rate.detach().numpy()
    np.testing.assert_allclose(a.grad.numpy(), want, rtol=1e-3)
    np.testing.assert_allclose(rate.grad.numpy(), -draws.detach().numpy() / rate.detach().numpy(), rtol=1e-5)
    c1, c0 = ggrad.tensor([2.0, 0.5], requires_grad=True), ggrad.tensor([3.0, 0.5], requires_grad=True)
    D.Beta(c1, c0).rsample((5,)).sum().backward()
    assert np.isfinite(c1.grad.numpy()).all() and np.isfinite(c0.grad.numpy()).all()
    assert (c1.grad.numpy() > 0).all() and (c0.grad.numpy() < 0).all()    # a draw rises with a, falls with b


def _spd(n, batch=(), seed=0):
    m = np.random.default_rng(seed).standard_normal(batch + (n, n)).astype(np.float32)
    return (m @ np.swapaxes(m, -1, -2) + n * np.eye(n, dtype=np.float32)).astype(np.float32)


@pytest.mark.parametrize("given", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_multivariate_normal(given):
    cov = _spd(4, (2,))
    matrix = {"covariance_matrix": cov, "precision_matrix": np.linalg.inv(cov).astype(np.float32),
              "scale_tril": np.linalg.cholesky(cov).astype(np.float32)}[given]
    loc = np.random.default_rng(1).standard_normal((3, 1, 4)).astype(np.float32)    # batches broadcast
    (gl, tl), (gm, tm) = _pair(loc), _pair(matrix)
    ours, theirs = D.MultivariateNormal(gl, **{given: gm}), TD.MultivariateNormal(tl, **{given: tm})
    assert ours.batch_shape == tuple(theirs.batch_shape) == (3, 2) and ours.event_shape == (4,)
    for prop in ("mean", "variance", "covariance_matrix", "precision_matrix", "scale_tril"):
        _same(getattr(ours, prop), getattr(theirs, prop), rtol=1e-4, atol=1e-5)
    x = np.random.default_rng(2).standard_normal((5, 3, 2, 4)).astype(np.float32)
    lp_ours, lp_theirs = ours.log_prob(ggrad.tensor(x)), theirs.log_prob(torch.tensor(x))
    _same(lp_ours, lp_theirs, rtol=1e-4, atol=1e-4)
    _same(ours.entropy(), theirs.entropy(), rtol=1e-5, atol=1e-5)
    _check_gradients(lp_ours.sum() + ours.entropy().sum(), lp_theirs.sum() + theirs.entropy().sum(),
                     [(gl, tl), (gm, tm)], rtol=1e-3, atol=1e-4)


def test_multivariate_normal_kl_rsample_and_errors():
    (gm, tm), (gl, tl) = _pair(_spd(3, seed=4)), _pair(np.array([0.5, -1.0, 2.0], np.float32))
    q = _spd(3, seed=5)
    ours = D.kl_divergence(D.MultivariateNormal(gl, gm), D.MultivariateNormal(ggrad.zeros(3), ggrad.tensor(q)))
    theirs = TD.kl_divergence(TD.MultivariateNormal(tl, tm), TD.MultivariateNormal(torch.zeros(3), torch.tensor(q)))
    _same(ours, theirs, rtol=1e-4, atol=1e-5)
    _check_gradients(ours, theirs, [(gm, tm), (gl, tl)], rtol=1e-3, atol=1e-4)
    ggrad.manual_seed(0)
    dist = D.MultivariateNormal(ggrad.tensor([1.0, -2.0]), ggrad.tensor([[2.0, 0.6], [0.6, 0.5]]))
    draws = dist.sample((20000,)).numpy()
    np.testing.assert_allclose(draws.mean(0), [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(np.cov(draws.T), [[2.0, 0.6], [0.6, 0.5]], atol=0.06)
    for kwargs in ({}, {"covariance_matrix": np.eye(2, dtype=np.float32), "scale_tril": np.eye(2, dtype=np.float32)},
                   {"covariance_matrix": np.array([[1.0, 2.0], [2.0, 1.0]], np.float32)}):
        with pytest.raises(ValueError) as theirs_error:
            TD.MultivariateNormal(torch.zeros(2), **{k: torch.tensor(v) for k, v in kwargs.items()})
        with pytest.raises(ValueError) as ours_error:
            D.MultivariateNormal(ggrad.zeros(2), **{k: ggrad.tensor(v) for k, v in kwargs.items()})
        assert str(ours_error.value).split(" (")[0] == str(theirs_error.value).split(" (")[0]


def test_cholesky_and_solve_triangular_against_torch_linalg():
    a = _spd(5, (2, 3))
    (g, t) = _pair(a)
    ours, theirs = ggrad.linalg.cholesky(g), torch.linalg.cholesky(t)
    _same(ours, theirs, rtol=1e-5, atol=1e-5)
    weights = np.random.default_rng(9).standard_normal(a.shape).astype(np.float32)
    _check_gradients(ours * ggrad.tensor(weights), theirs * torch.tensor(weights), [(g, t)], rtol=1e-4, atol=1e-5)
    _same(ggrad.linalg.cholesky(g, upper=True), torch.linalg.cholesky(t, upper=True), rtol=1e-5, atol=1e-5)
    L = theirs.detach()
    rhs = np.random.default_rng(3).standard_normal((3, 5, 2)).astype(np.float32)
    for upper in (False, True):
        for left in (True, False):
            for unit in (False, True):
                A_ = L.transpose(-2, -1) if upper else L
                b = rhs if left else np.swapaxes(rhs, -1, -2).copy()
                (ga, ta), (gb, tb) = _pair(A_.numpy()), _pair(b)
                x_ours = ggrad.linalg.solve_triangular(ga, gb, upper=upper, left=left, unitriangular=unit)
                x_theirs = torch.linalg.solve_triangular(ta, tb, upper=upper, left=left, unitriangular=unit)
                _same(x_ours, x_theirs, rtol=1e-4, atol=1e-5)
                _check_gradients(x_ours, x_theirs, [(ga, ta), (gb, tb)], rtol=1e-3, atol=1e-4)
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.cholesky(torch.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ggrad.linalg.LinAlgError, match="not positive-definite"):
        ggrad.linalg.cholesky(ggrad.tensor([[1.0, 2.0], [2.0, 1.0]]))
