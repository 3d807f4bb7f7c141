"""`ggrad.distributions` against `torch.distributions`: log_prob, cdf/icdf, entropy, mean, variance, KL divergences,
reparameterized gradients, sample shapes and statistics, parameter validation."""

import math

import numpy as np
import pytest

import ggrad
from ggrad import distributions as D

torch = pytest.importorskip("torch")
TD = torch.distributions

LOC = np.array([0.0, 1.5, -2.0], np.float32)
SCALE = np.array([1.0, 0.5, 3.0], np.float32)
PROBS = np.array([[0.2, 0.3, 0.5], [0.0, 0.25, 0.75]], np.float32)


def _same(ours, theirs, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol)


def _both(name, *params, **kwargs):
    ours = getattr(D, name)(*[ggrad.tensor(p) if isinstance(p, np.ndarray) else p for p in params],
                            **{k: ggrad.tensor(v) for k, v in kwargs.items()})
    theirs = getattr(TD, name)(*[torch.tensor(p) if isinstance(p, np.ndarray) else p for p in params],
                               **{k: torch.tensor(v) for k, v in kwargs.items()})
    return ours, theirs


def test_normal():
    ours, theirs = _both("Normal", LOC, SCALE)
    x = np.array([0.3, 1.0, -5.0], np.float32)
    _same(ours.log_prob(ggrad.tensor(x)), theirs.log_prob(torch.tensor(x)))
    _same(ours.cdf(ggrad.tensor(x)), theirs.cdf(torch.tensor(x)))
    _same(ours.icdf(ggrad.tensor([0.1, 0.5, 0.9])), theirs.icdf(torch.tensor([0.1, 0.5, 0.9])), rtol=1e-5)
    for prop in ("mean", "variance", "stddev"):
        _same(getattr(ours, prop), getattr(theirs, prop))
    _same(ours.entropy(), theirs.entropy())
    assert ours.batch_shape == tuple(theirs.batch_shape) and ours.sample((5, 2)).shape == (5, 2, 3)
    ggrad.manual_seed(0)
    draws = D.Normal(2.0, 3.0).sample((20000,)).numpy()
    assert abs(draws.mean() - 2.0) < 0.1 and abs(draws.std() - 3.0) < 0.1


def test_rsample_carries_the_gradient_to_the_parameters():
    loc, scale = ggrad.tensor(LOC, requires_grad=True), ggrad.tensor(SCALE, requires_grad=True)
    z = D.Normal(loc, scale).rsample((4,))
    z.sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), [4.0, 4.0, 4.0])
    noise = (z.detach() - ggrad.tensor(LOC)) / ggrad.tensor(SCALE)
    np.testing.assert_allclose(scale.grad.numpy(), noise.sum(0).numpy(), rtol=1e-5)
    assert not D.Normal(loc, scale).sample().requires_grad
    low = ggrad.tensor([0.0], requires_grad=True)
    D.Uniform(low, 2.0).rsample((3,)).sum().backward()
    assert low.grad.shape == (1,)


def test_uniform():
    ours, theirs = _both("Uniform", np.array([0.0, -1.0], np.float32), np.array([2.0, 3.0], np.float32))
    x = np.array([1.0, 2.5], np.float32)
    with pytest.raises(ValueError):
        theirs.log_prob(torch.tensor([1.0, 5.0]))
    with pytest.raises(ValueError, match="support"):
        ours.log_prob(ggrad.tensor([1.0, 5.0]))
    _same(ours.log_prob(ggrad.tensor(x)), theirs.log_prob(torch.tensor(x)))
    for prop in ("mean", "variance", "stddev"):
        _same(getattr(ours, prop), getattr(theirs, prop))
    _same(ours.entropy(), theirs.entropy())
    _same(ours.cdf(ggrad.tensor(x)), theirs.cdf(torch.tensor(x)))


@pytest.mark.parametrize("given", ["probs", "logits"])
def test_bernoulli(given):
    values = np.array([0.2, 0.0, 1.0, 0.7], np.float32) if given == "probs" else np.array([-1.0, 0.0, 3.0, -20.0],
                                                                                              np.float32)
    ours, theirs = _both("Bernoulli", **{given: values})
    x = np.array([1.0, 0.0, 1.0, 0.0], np.float32)
    _same(ours.log_prob(ggrad.tensor(x)), theirs.log_prob(torch.tensor(x)), rtol=1e-4, atol=1e-5)
    _same(ours.entropy(), theirs.entropy(), rtol=1e-4, atol=1e-5)
    for prop in ("mean", "variance", "probs", "logits"):
        _same(getattr(ours, prop), getattr(theirs, prop), rtol=1e-4, atol=1e-4)
    assert set(np.unique(ours.sample((50,)).numpy())) <= {0.0, 1.0}


@pytest.mark.parametrize("given", ["probs", "logits"])
def test_categorical(given):
    values = PROBS if given == "probs" else np.log(PROBS + 0.1)
    ours, theirs = _both("Categorical", **{given: values})
    x = np.array([2, 1])
    _same(ours.log_prob(ggrad.tensor(x)), theirs.log_prob(torch.tensor(x)))
    _same(ours.log_prob(ggrad.tensor([[0], [1]])), theirs.log_prob(torch.tensor([[0], [1]])))
    _same(ours.entropy(), theirs.entropy())
    _same(ours.probs, theirs.probs)
    assert np.isnan(ours.mean.numpy()).all() and ours.mean.shape == tuple(theirs.mean.shape)
    drawn = ours.sample((3000,))
    assert drawn.shape == (3000, 2) and drawn.dtype == ggrad.int64
    if given == "probs":
        assert (drawn.numpy()[:, 1] != 0).all()                      # probability 0 is never drawn
        assert abs((drawn.numpy()[:, 0] == 2).mean() - 0.5) < 0.05


@pytest.mark.parametrize("pair", [
    ("Normal", (LOC, SCALE), (np.array([1.0, 1.0, 1.0], np.float32), np.array([2.0, 0.5, 1.0], np.float32))),
    ("Bernoulli", (np.array([0.2, 0.0, 1.0], np.float32),), (np.array([0.5, 0.3, 0.9], np.float32),)),
    ("Categorical", (PROBS,), (np.array([[0.1, 0.1, 0.8], [0.3, 0.3, 0.4]], np.float32),)),
    ("Uniform", (np.array([0.0, 0.0], np.float32), np.array([1.0, 1.0], np.float32)),
     (np.array([-1.0, 0.5], np.float32), np.array([2.0, 2.0], np.float32))),
])
def test_kl_divergence(pair):
    name, p_params, q_params = pair
    p_ours, p_theirs = _both(name, *p_params)
    q_ours, q_theirs = _both(name, *q_params)
    _same(D.kl_divergence(p_ours, q_ours), TD.kl_divergence(p_theirs, q_theirs), rtol=1e-4, atol=1e-5)


def test_validation_and_unregistered_pairs_as_pytorch():
    with pytest.raises(ValueError):
        TD.Normal(0.0, -1.0)
    with pytest.raises(ValueError, match="scale"):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError, match="probs"):
        D.Bernoulli(probs=ggrad.tensor([1.5]))
    with pytest.raises(ValueError, match="not both"):
        D.Categorical(probs=ggrad.tensor([0.5, 0.5]), logits=ggrad.tensor([0.0, 0.0]))
    assert D.Normal(0.0, -1.0, validate_args=False).scale.item() == -1.0
    with pytest.raises(NotImplementedError):
        TD.kl_divergence(TD.Normal(0.0, 1.0), TD.Bernoulli(0.5))
    with pytest.raises(NotImplementedError, match="Normal"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Bernoulli(0.5))
    with pytest.raises(NotImplementedError, match="rsample"):
        D.Bernoulli(0.5).rsample()

    @D.register_kl(D.Normal, D.Bernoulli)
    def _toy(p, q):
        return p.loc * 0 + math.pi
    assert D.kl_divergence(D.Normal(0.0, 1.0), D.Bernoulli(0.5)).item() == pytest.approx(math.pi)
    del D.kl._REGISTRY[(D.Normal, D.Bernoulli)]
