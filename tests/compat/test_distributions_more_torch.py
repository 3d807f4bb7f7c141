"""Exponential, Laplace, Cauchy, Gumbel, LogNormal, HalfNormal, Chi2, Geometric, OneHotCategorical, Poisson and
Independent against torch.distributions: log_prob, cdf/icdf, entropy, mean, mode, variance and their gradients;
reparameterized draws (their gradients, their distribution by a Kolmogorov-Smirnov test), shapes, validation."""

import math

import numpy as np
import pytest

import ggrad
from ggrad import distributions as D

torch = pytest.importorskip("torch")
TD = torch.distributions

LOC = np.array([0.0, 1.5, -2.0], np.float32)
SCALE = np.array([1.0, 0.5, 3.0], np.float32)
# (name, parameters, values inside the support, probabilities for icdf or None)
CASES = [
    ("Exponential", (SCALE,), np.array([0.1, 2.0, 0.0], np.float32), True),
    ("Laplace", (LOC, SCALE), np.array([0.3, 1.0, -5.0], np.float32), True),
    ("Cauchy", (LOC, SCALE), np.array([0.3, 1.0, -5.0], np.float32), True),
    ("Gumbel", (LOC, SCALE), np.array([0.3, 1.0, -5.0], np.float32), True),
    ("LogNormal", (LOC, SCALE), np.array([0.3, 1.0, 5.0], np.float32), True),
    ("HalfNormal", (SCALE,), np.array([0.3, 1.0, 5.0], np.float32), True),
    ("Chi2", (SCALE * 3,), np.array([0.3, 1.0, 5.0], np.float32), False),
]
PROPERTIES = ("mean", "mode", "variance", "stddev")


def _pair(name, params):
    ours = [ggrad.tensor(p, requires_grad=True) for p in params]
    theirs = [torch.tensor(p, requires_grad=True) for p in params]
    return (getattr(D, name)(*ours), ours), (getattr(TD, name)(*theirs), theirs)


@pytest.mark.parametrize("name, params, values, has_icdf", CASES, ids=[c[0] for c in CASES])
def test_continuous_against_pytorch(name, params, values, has_icdf):
    (ours, our_params), (theirs, their_params) = _pair(name, params)
    assert ours.batch_shape == tuple(theirs.batch_shape) and ours.has_rsample == theirs.has_rsample
    results = {}
    for lib, dist, leaves in ((ggrad, ours, our_params), (torch, theirs, their_params)):
        parts = {"log_prob": dist.log_prob(lib.tensor(values)), "entropy": dist.entropy()}
        if name != "Chi2":
            parts["cdf"] = dist.cdf(lib.tensor(values))
        if has_icdf:
            parts["icdf"] = dist.icdf(lib.tensor([0.1, 0.5, 0.9]))
        for prop in PROPERTIES:
            if name == "Cauchy" and prop in ("mean", "variance", "stddev"):
                continue
            parts[prop] = getattr(dist, prop)
        total = sum((p * (i + 1)).sum() for i, p in enumerate(parts.values()))
        grads = lib.autograd.grad(total, leaves)
        results[lib] = {k: v.detach().numpy() for k, v in parts.items()}, [g.numpy() for g in grads]
    for key, value in results[torch][0].items():
        np.testing.assert_allclose(results[ggrad][0][key], value, rtol=2e-5, atol=1e-6, err_msg=key)
    for ours_g, theirs_g in zip(results[ggrad][1], results[torch][1]):
        np.testing.assert_allclose(ours_g, theirs_g, rtol=2e-4, atol=1e-5)


def _ks(draws, cdf):
    draws = np.sort(draws)
    n = len(draws)
    values = cdf(draws)
    return max(np.max(np.arange(1, n + 1) / n - values), np.max(values - np.arange(n) / n))


@pytest.mark.parametrize("name, params", [("Exponential", (1.7,)), ("Laplace", (0.5, 2.0)), ("Cauchy", (-1.0, 0.3)),
                                          ("Gumbel", (2.0, 1.5)), ("LogNormal", (0.2, 0.6)), ("HalfNormal", (1.3,))])
def test_draws_follow_the_distribution_and_carry_gradients(name, params):
    ggrad.manual_seed(5)
    leaves = [ggrad.tensor(p, requires_grad=True) for p in params]
    dist = getattr(D, name)(*leaves)
    draws = dist.rsample((4000,))
    assert draws.shape == (4000,)
    reference = getattr(TD, name)(*[torch.tensor(p, dtype=torch.float64) for p in params])
    values = draws.detach().numpy().astype(np.float64)
    distance = _ks(values, lambda v: reference.cdf(torch.tensor(v)).numpy())
    assert distance < 1.63 / math.sqrt(4000), distance   # the 1% critical value
    draws.sum().backward()
    for leaf in leaves:
        assert leaf.grad is not None and np.isfinite(leaf.grad.numpy()).all()
    if name in ("Laplace", "Cauchy", "Gumbel"):          # x = loc + scale * z: dx/dloc = 1, dx/dscale = z
        np.testing.assert_allclose(leaves[0].grad.item(), 4000, rtol=1e-6)
        np.testing.assert_allclose(leaves[1].grad.item(), ((values - params[0]) / params[1]).sum(), rtol=1e-3)


def test_chi2_is_gamma_of_half_df():
    chi2 = D.Chi2(ggrad.tensor([3.0, 5.0]))
    assert isinstance(chi2, D.Gamma)
    np.testing.assert_allclose(chi2.df.numpy(), [3.0, 5.0])
    np.testing.assert_allclose(chi2.cdf(ggrad.tensor([2.0, 4.0])).numpy(),
                               TD.Chi2(torch.tensor([3.0, 5.0])).cdf(torch.tensor([2.0, 4.0])).numpy(), rtol=1e-5)


@pytest.mark.parametrize("param", ["probs", "logits"])
def test_geometric(param):
    value = np.array([[0.2, 0.7, 1.0]], np.float32) if param == "probs" else np.array([[-1.0, 0.5, 3.0]], np.float32)
    k = np.array([[0.0, 3.0, 0.0], [5.0, 1.0, 2.0]], np.float32)
    results = []
    for lib, dist in ((ggrad, D), (torch, TD)):
        leaf = lib.tensor(value, requires_grad=True)
        g = dist.Geometric(**{param: leaf})
        parts = [g.log_prob(lib.tensor(k)), g.mean, g.variance, g.mode]
        if not (param == "probs"):   # PyTorch's entropy of p = 1 is nan
            parts.append(g.entropy())
        sum((p * (i + 1)).sum() for i, p in enumerate(parts)).backward()
        results.append([p.detach().numpy() for p in parts] + [leaf.grad.numpy()])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6, equal_nan=True)
    ggrad.manual_seed(0)
    draws = D.Geometric(probs=ggrad.tensor(0.3)).sample((20000,)).numpy()
    assert abs(draws.mean() - (1 / 0.3 - 1)) < 0.1 and draws.min() == 0 and np.all(draws == np.floor(draws))


def test_one_hot_categorical():
    probs = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]], np.float32)
    ours, theirs = D.OneHotCategorical(probs=ggrad.tensor(probs)), TD.OneHotCategorical(probs=torch.tensor(probs))
    assert ours.event_shape == tuple(theirs.event_shape) == (3,) and ours.batch_shape == (2,)
    value = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]], np.float32)
    for ours_v, theirs_v in ((ours.log_prob(ggrad.tensor(value)), theirs.log_prob(torch.tensor(value))),
                             (ours.entropy(), theirs.entropy()), (ours.mean, theirs.mean),
                             (ours.variance, theirs.variance), (ours.mode, theirs.mode)):
        np.testing.assert_allclose(ours_v.numpy(), theirs_v.numpy(), rtol=1e-6)
    ggrad.manual_seed(1)
    draws = ours.sample((5000,)).numpy()
    assert draws.shape == (5000, 2, 3) and np.array_equal(draws.sum(-1), np.ones((5000, 2)))
    np.testing.assert_allclose(draws.mean(0), probs, atol=0.03)


def test_poisson():
    rate = np.array([0.5, 3.0, 12.0], np.float32)
    k = np.array([[0.0, 2.0, 11.0], [4.0, 0.0, 30.0]], np.float32)
    results = []
    for lib, dist in ((ggrad, D), (torch, TD)):
        leaf = lib.tensor(rate, requires_grad=True)
        p = dist.Poisson(leaf)
        parts = [p.log_prob(lib.tensor(k)), p.mean, p.variance, p.mode]
        sum((q * (i + 1)).sum() for i, q in enumerate(parts)).backward()
        results.append([q.detach().numpy() for q in parts] + [leaf.grad.numpy()])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    ggrad.manual_seed(2)
    draws = D.Poisson(ggrad.tensor(rate)).sample((8000,)).numpy()
    assert draws.shape == (8000, 3)
    np.testing.assert_allclose(draws.mean(0), rate, rtol=0.05)
    with pytest.raises(ValueError, match="IntegerGreaterThan"):
        D.Poisson(2.0).log_prob(ggrad.tensor([1.5]))


def test_independent_normal_as_rl_policies_use_it():
    loc, scale = np.zeros((4, 3), np.float32) + LOC, np.ones((4, 3), np.float32) * SCALE
    action = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    results = []
    for lib, dist in ((ggrad, D), (torch, TD)):
        mu = lib.tensor(loc, requires_grad=True)
        policy = dist.Independent(dist.Normal(mu, lib.tensor(scale)), 1)
        assert tuple(policy.batch_shape) == (4,) and tuple(policy.event_shape) == (3,)
        log_prob, entropy = policy.log_prob(lib.tensor(action)), policy.entropy()
        (log_prob.sum() + entropy.sum()).backward()
        results.append([log_prob.detach().numpy(), entropy.detach().numpy(), mu.grad.numpy(),
                        policy.mean.detach().numpy(), policy.variance.detach().numpy()])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    policy = D.Independent(D.Normal(ggrad.zeros(4, 3), ggrad.ones(4, 3)), 2)
    assert policy.batch_shape == () and policy.event_shape == (4, 3) and policy.log_prob(ggrad.zeros(4, 3)).shape == ()
    assert policy.rsample((5,)).shape == (5, 4, 3) and policy.has_rsample
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        D.Independent(D.Normal(0.0, 1.0), 1)


def test_validation_as_pytorchs():
    for make in (lambda d: d.Exponential(-1.0), lambda d: d.Laplace(0.0, 0.0), lambda d: d.HalfNormal(-2.0),
                 lambda d: d.LogNormal(0.0, -1.0), lambda d: d.Geometric(probs=1.5), lambda d: d.Poisson(-0.5)):
        with pytest.raises(ValueError):
            make(TD)
        with pytest.raises(ValueError):
            make(D)
