"""TransformedDistribution with the elementwise transforms (SAC's tanh-squashed Gaussian), Dirichlet and
StudentT against torch.distributions: log_prob, cdf, entropy, moments and their gradients; draws by their
statistics; the transforms' cache."""

import math

import numpy as np
import pytest

import ggrad
from ggrad import distributions as D

torch = pytest.importorskip("torch")
TD = torch.distributions


def _transforms(lib_d, lib):
    return {
        "tanh": [lib_d.TanhTransform(cache_size=1)],
        "exp_affine": [lib_d.ExpTransform(), lib_d.AffineTransform(lib.tensor(1.5), lib.tensor(-2.0))],
        "sigmoid": [lib_d.SigmoidTransform()],
        "softplus": [lib_d.SoftplusTransform()],
        "compose": [lib_d.ComposeTransform([lib_d.AffineTransform(0.5, 3.0), lib_d.TanhTransform()])],
    }


VALUES = {"tanh": [-0.9, 0.0, 0.5], "exp_affine": [1.0, -3.0, 0.2], "sigmoid": [0.1, 0.5, 0.99],
          "softplus": [0.2, 1.0, 4.0], "compose": [-0.5, 0.3, 0.9]}


@pytest.mark.parametrize("name", list(VALUES))
def test_transformed_log_prob_and_gradients(name):
    loc, scale = np.array([0.2, -0.4, 1.0], np.float32), np.array([0.7, 1.3, 0.5], np.float32)
    results = []
    for lib, lib_d in ((ggrad, D), (torch, TD)):
        mu, sigma = lib.tensor(loc, requires_grad=True), lib.tensor(scale, requires_grad=True)
        dist = lib_d.TransformedDistribution(lib_d.Normal(mu, sigma), _transforms(lib_d, lib)[name])
        log_prob = dist.log_prob(lib.tensor(np.array(VALUES[name], np.float32)))
        log_prob.sum().backward()
        results.append([log_prob.detach().numpy(), mu.grad.numpy(), sigma.grad.numpy()])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=1e-5)


def test_sac_policy_squashed_draws_and_their_log_prob():
    """rsample through tanh, then log_prob of that very action: the cache gives back the pre-tanh draw, so the
    log-probability is base.log_prob(u) - log(1 - tanh(u)^2) even where tanh(u) rounds to 1."""
    ggrad.manual_seed(0)
    mu = ggrad.tensor([0.0, 8.0, -1.0], requires_grad=True)
    policy = D.Independent(D.TransformedDistribution(D.Normal(mu, ggrad.ones(3)), [D.TanhTransform(cache_size=1)]), 1)
    action = policy.rsample()
    log_prob = policy.log_prob(action)
    u = policy.base_dist.transforms[0]._cached[0]
    base = D.Normal(mu, ggrad.ones(3))
    want = (base.log_prob(u) - 2.0 * (math.log(2.0) - u - ggrad.nn.functional.softplus(-2.0 * u))).sum()
    np.testing.assert_allclose(log_prob.item(), want.item(), rtol=1e-5)
    assert np.isfinite(log_prob.item()) and action.shape == (3,) and np.all(np.abs(action.numpy()) <= 1)
    (log_prob + action.sum()).backward()
    assert mu.grad is not None and np.isfinite(mu.grad.numpy()).all()


def test_transformed_draws_follow_the_distribution():
    ggrad.manual_seed(1)
    dist = D.TransformedDistribution(D.Normal(0.3, 0.8), [D.ExpTransform()])
    draws = np.sort(dist.sample((4000,)).numpy().astype(np.float64))
    reference = TD.LogNormal(torch.tensor(0.3, dtype=torch.float64), torch.tensor(0.8, dtype=torch.float64))
    values = reference.cdf(torch.tensor(draws)).numpy()
    n = len(draws)
    distance = max(np.max(np.arange(1, n + 1) / n - values), np.max(values - np.arange(n) / n))
    assert distance < 1.63 / math.sqrt(n)
    np.testing.assert_allclose(dist.cdf(ggrad.tensor([1.0, 2.0])).numpy(),
                               reference.cdf(torch.tensor([1.0, 2.0], dtype=torch.float64)).numpy(), rtol=1e-5)


def test_dirichlet():
    conc = np.array([[0.5, 2.0, 3.0], [1.5, 1.5, 0.8]], np.float32)
    value = np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]], np.float32)
    results = []
    for lib, lib_d in ((ggrad, D), (torch, TD)):
        a = lib.tensor(conc, requires_grad=True)
        dist = lib_d.Dirichlet(a)
        assert tuple(dist.batch_shape) == (2,) and tuple(dist.event_shape) == (3,)
        parts = [dist.log_prob(lib.tensor(value)), dist.entropy(), dist.mean, dist.variance]
        sum((p * (i + 1)).sum() for i, p in enumerate(parts)).backward()
        results.append([p.detach().numpy() for p in parts] + [a.grad.numpy(), dist.mode.detach().numpy()])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=1e-6)
    ggrad.manual_seed(2)
    a = ggrad.tensor([2.0, 5.0, 1.0], requires_grad=True)
    draws = D.Dirichlet(a).rsample((6000,))
    np.testing.assert_allclose(draws.detach().numpy().mean(0), [0.25, 0.625, 0.125], atol=0.01)
    np.testing.assert_allclose(draws.detach().numpy().sum(-1), 1.0, rtol=1e-5)
    draws[:, 0].mean().backward()    # d E[x0] / d a = (a0 + a1 + a2 - a0) / sum^2 and -a0 / sum^2
    np.testing.assert_allclose(a.grad.numpy(), [6 / 64, -2 / 64, -2 / 64], atol=0.01)


def test_student_t():
    df, loc, scale = np.array([0.8, 1.5, 3.0, 30.0], np.float32), np.float32(0.5), np.array([1.0, 2.0, 0.5, 1.5],
                                                                                               np.float32)
    value = np.array([0.1, -3.0, 2.0, 0.5], np.float32)
    results = []
    for lib, lib_d in ((ggrad, D), (torch, TD)):
        d, s = lib.tensor(df, requires_grad=True), lib.tensor(scale, requires_grad=True)
        dist = lib_d.StudentT(d, lib.tensor(loc), s)
        parts = [dist.log_prob(lib.tensor(value)), dist.entropy()]
        sum((p * (i + 1)).sum() for i, p in enumerate(parts)).backward()
        results.append([p.detach().numpy() for p in parts] + [d.grad.numpy(), s.grad.numpy()] +
                       [getattr(dist, name).detach().numpy() for name in ("mean", "variance", "mode")])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=1e-6, equal_nan=True)
    ggrad.manual_seed(3)
    draws = D.StudentT(5.0, 1.0, 2.0).sample((4000,)).numpy().astype(np.float64)
    # PyTorch's StudentT has no cdf: the sample's median and spread (sd 2 sqrt(5/3) = 2.58)
    assert abs(np.median(draws) - 1.0) < 0.1 and abs(np.std(draws) - 2.0 * math.sqrt(5 / 3)) < 0.2
