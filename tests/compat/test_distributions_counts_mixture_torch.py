"""Binomial, Multinomial and MixtureSameFamily against torch.distributions: log_prob, entropy, mean, mode,
variance and their gradients in the parameters; draws (shapes, moments), enumerate_support, validation and
PyTorch's errors."""

import numpy as np
import pytest

import ggrad
from ggrad import distributions as D

torch = pytest.importorskip("torch")
TD = torch.distributions


def _close(ours, theirs, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("by", ["probs", "logits"])
@pytest.mark.parametrize("count", [7, [[3.0], [10.0]]])
def test_binomial(by, count):
    param = np.array([0.2, 0.5, 0.9], np.float32) if by == "probs" else np.array([-1.5, 0.0, 2.0], np.float32)
    values = np.array([[0.0, 2.0, 3.0], [1.0, 3.0, 3.0]], np.float32)
    grads = []
    for lib, dists in ((ggrad, D), (torch, TD)):
        p = lib.tensor(param, requires_grad=True)
        n = lib.tensor(count) if isinstance(count, list) else count
        d = dists.Binomial(n, **{by: p})
        parts = [d.log_prob(lib.tensor(values)), d.mean, d.variance, d.mode]
        if not isinstance(count, list):
            parts.append(d.entropy())
        sum(part.float().sum() for part in parts[:3] + parts[4:]).backward()
        grads.append((parts, p.grad))
    for ours, theirs in zip(grads[0][0], grads[1][0]):
        assert tuple(ours.shape) == tuple(theirs.shape)
        _close(ours, theirs)
    _close(grads[0][1], grads[1][1], rtol=1e-4)


def test_binomial_draws_support_and_errors():
    ggrad.manual_seed(0)
    d = D.Binomial(ggrad.tensor([5.0, 20.0]), probs=ggrad.tensor([0.3, 0.8]))
    draws = d.sample((4000,))
    assert draws.shape == (4000, 2) and draws.dtype == ggrad.float32
    np.testing.assert_allclose(draws.numpy().mean(0), [1.5, 16.0], rtol=0.05)
    np.testing.assert_allclose(draws.numpy().var(0), [1.05, 3.2], rtol=0.1)
    support = D.Binomial(3, probs=ggrad.tensor([0.1, 0.2])).enumerate_support()
    np.testing.assert_array_equal(support.numpy(), TD.Binomial(3, probs=torch.tensor([0.1, 0.2]))
                                  .enumerate_support().numpy())
    for make in (lambda lib, dists: dists.Binomial(-1, probs=lib.tensor(0.5)),
                 lambda lib, dists: dists.Binomial(3, probs=lib.tensor(1.5)),
                 lambda lib, dists: dists.Binomial(3, probs=lib.tensor(0.5)).log_prob(lib.tensor(4.0)),
                 lambda lib, dists: dists.Binomial(lib.tensor([2.0, 3.0]), probs=lib.tensor(0.5)).entropy()):
        with pytest.raises(Exception) as theirs:
            make(torch, TD)
        with pytest.raises(type(theirs.value)):
            make(ggrad, D)


@pytest.mark.parametrize("by", ["probs", "logits"])
def test_multinomial(by):
    param = np.array([[0.2, 0.3, 0.5], [0.7, 0.1, 0.2]], np.float32)
    param = param if by == "probs" else np.log(param) + 0.3
    values = np.array([[1.0, 2.0, 3.0], [6.0, 0.0, 0.0]], np.float32)
    results = []
    for lib, dists in ((ggrad, D), (torch, TD)):
        p = lib.tensor(param, requires_grad=True)
        d = dists.Multinomial(6, **{by: p})
        parts = [d.log_prob(lib.tensor(values)), d.entropy(), d.mean, d.variance]
        sum(part.sum() for part in parts).backward()
        results.append((parts, p.grad, d.batch_shape, d.event_shape))
    for ours, theirs in zip(results[0][0], results[1][0]):
        _close(ours, theirs)
    _close(results[0][1], results[1][1], rtol=1e-4)
    assert tuple(results[0][2]) == tuple(results[1][2]) and tuple(results[0][3]) == tuple(results[1][3])


def test_multinomial_draws_and_a_zero_probability():
    ggrad.manual_seed(0)
    d = D.Multinomial(10, probs=ggrad.tensor([0.0, 0.25, 0.75]))
    draws = d.sample((3000,))
    assert draws.shape == (3000, 3)
    assert (draws.numpy().sum(-1) == 10).all() and (draws.numpy()[:, 0] == 0).all()
    np.testing.assert_allclose(draws.numpy().mean(0), [0.0, 2.5, 7.5], atol=0.1)
    value = [0.0, 4.0, 6.0]
    _close(d.log_prob(ggrad.tensor(value)), TD.Multinomial(10, probs=torch.tensor([0.0, 0.25, 0.75]))
           .log_prob(torch.tensor(value)))


def _gaussian_mixture(lib, dists, leaves):
    weights, loc, scale = leaves
    return dists.MixtureSameFamily(dists.Categorical(logits=weights), dists.Normal(loc, scale))


def test_mixture_of_normals():
    params = [np.array([[0.1, -0.5, 1.0], [0.0, 0.0, 0.0]], np.float32),
              np.array([[-1.0, 0.5, 2.0], [0.0, 1.0, -3.0]], np.float32),
              np.array([[0.5, 1.0, 2.0], [1.5, 0.3, 0.7]], np.float32)]
    values = np.array([[0.3, -2.0], [1.0, 0.0], [5.0, -3.0]], np.float32)
    results = []
    for lib, dists in ((ggrad, D), (torch, TD)):
        leaves = [lib.tensor(p, requires_grad=True) for p in params]
        d = _gaussian_mixture(lib, dists, leaves)
        parts = [d.log_prob(lib.tensor(values)), d.mean, d.variance, d.cdf(lib.tensor(values))]
        sum(part.sum() for part in parts).backward()
        results.append((parts, [leaf.grad for leaf in leaves], d.batch_shape, d.event_shape))
    for ours, theirs in zip(results[0][0], results[1][0]):
        _close(ours, theirs)
    for ours, theirs in zip(results[0][1], results[1][1]):
        _close(ours, theirs, rtol=1e-4)
    assert tuple(results[0][2]) == (2,) and tuple(results[0][3]) == ()


def test_mixture_with_event_dims_and_draws():
    """Components with an event shape (Independent Normals over 2 dims): log_prob, mean, variance, draws."""
    ggrad.manual_seed(0)
    loc = np.array([[-4.0, 0.0], [4.0, 1.0]], np.float32)
    scale = np.array([[0.5, 1.0], [1.0, 0.25]], np.float32)
    results = []
    for lib, dists in ((ggrad, D), (torch, TD)):
        d = dists.MixtureSameFamily(dists.Categorical(probs=lib.tensor([0.3, 0.7])),
                                    dists.Independent(dists.Normal(lib.tensor(loc), lib.tensor(scale)), 1))
        results.append((d, [d.log_prob(lib.tensor([[0.0, 0.5], [4.0, 1.0]])), d.mean, d.variance]))
    for ours, theirs in zip(results[0][1], results[1][1]):
        _close(ours, theirs)
    ours = results[0][0]
    assert ours.batch_shape == () and ours.event_shape == (2,)
    draws = ours.sample((5000,)).numpy()
    assert draws.shape == (5000, 2)
    np.testing.assert_allclose(draws.mean(0), results[1][1][1].numpy(), atol=0.15)
    np.testing.assert_allclose((draws[:, 0] > 0).mean(), 0.7, atol=0.03)


@pytest.mark.parametrize("make", [
    lambda lib, dists: dists.MixtureSameFamily(dists.Normal(lib.zeros(2), lib.ones(2)),
                                               dists.Normal(lib.zeros(2), lib.ones(2))),
    lambda lib, dists: dists.MixtureSameFamily(dists.Categorical(logits=lib.zeros(3)),
                                               dists.Normal(lib.zeros(2), lib.ones(2))),
    lambda lib, dists: dists.MixtureSameFamily(dists.Categorical(logits=lib.zeros(2)), "normal")])
def test_mixture_errors_as_pytorchs(make):
    with pytest.raises(Exception) as theirs:
        make(torch, TD)
    with pytest.raises(type(theirs.value)):
        make(ggrad, D)
