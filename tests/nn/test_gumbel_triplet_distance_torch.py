"""F.gumbel_softmax (soft and straight-through hard draws, their gradients, the Gumbel-max frequencies),
TripletMarginWithDistanceLoss / F.triplet_margin_with_distance_loss and torch.mvlgamma against PyTorch."""
import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

LOGITS = np.array([[1.0, 0.0, -1.0, 0.5], [0.0, 2.0, 0.0, -3.0]], np.float32)


@pytest.mark.parametrize("tau", [1.0, 0.3])
def test_gumbel_softmax_soft_and_hard_share_the_draw_and_gradient(tau):
    weights = ggrad.tensor(np.arange(8, dtype=np.float32).reshape(2, 4))
    grads = []
    for hard in (False, True):
        ggrad.manual_seed(7)
        logits = ggrad.tensor(LOGITS, requires_grad=True)
        y = ggrad.nn.functional.gumbel_softmax(logits, tau=tau, hard=hard)
        assert y.shape == (2, 4)
        np.testing.assert_allclose(y.detach().numpy().sum(-1), [1.0, 1.0], rtol=1e-6)
        if hard:
            assert set(np.unique(y.detach().numpy())) <= {0.0, 1.0}
            assert (y.detach().numpy().argmax(-1) == soft.argmax(-1)).all()
        else:
            soft = y.detach().numpy()
        (y * weights).sum().backward()
        grads.append(logits.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)   # straight-through: the soft sample's gradient


def test_gumbel_max_frequencies_are_the_softmax():
    ggrad.manual_seed(0)
    logits = ggrad.tensor(LOGITS[:1]).expand(4000, 4)
    picks = ggrad.nn.functional.gumbel_softmax(logits, hard=True, dim=1).numpy().mean(0)
    expected = torch.softmax(torch.tensor(LOGITS[0]), 0).numpy()
    np.testing.assert_allclose(picks, expected, atol=0.03)


@pytest.mark.parametrize("distance", [None, "cosine", "l1"])
@pytest.mark.parametrize("swap, reduction", [(False, "mean"), (True, "sum"), (False, "none")])
def test_triplet_margin_with_distance_loss(distance, swap, reduction):
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((5, 6)).astype(np.float32) for _ in range(3)]
    results = []
    for lib in (ggrad, torch):
        fn = {None: None, "cosine": lambda a, b: 1.0 - lib.nn.functional.cosine_similarity(a, b),
              "l1": lambda a, b: (a - b).abs().sum(-1)}[distance]
        leaves = [lib.tensor(d, requires_grad=True) for d in data]
        module = lib.nn.TripletMarginWithDistanceLoss(distance_function=fn, margin=0.7, swap=swap,
                                                     reduction=reduction)
        loss = module(*leaves)
        functional = lib.nn.functional.triplet_margin_with_distance_loss(
            *leaves, distance_function=fn, margin=0.7, swap=swap, reduction=reduction)
        loss.sum().backward()
        results.append([loss.detach().numpy(), functional.detach().numpy()] + [t.grad.numpy() for t in leaves])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_triplet_margin_with_distance_errors_as_pytorchs():
    for call in (lambda lib: lib.nn.functional.triplet_margin_with_distance_loss(lib.ones(2, 3), lib.ones(2, 3),
                                                                                 lib.ones(2, 3), margin=0.0),
                 lambda lib: lib.nn.functional.triplet_margin_with_distance_loss(lib.ones(2, 3), lib.ones(3),
                                                                                 lib.ones(2, 3))):
        with pytest.raises(Exception) as theirs:
            call(torch)
        with pytest.raises(type(theirs.value)):
            call(ggrad)


def test_mvlgamma_function_method_and_inplace():
    x = np.array([2.5, 3.0, 7.25], np.float32)
    expected = torch.mvlgamma(torch.tensor(x), 3).numpy()
    np.testing.assert_allclose(ggrad.mvlgamma(ggrad.tensor(x), 3).numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(ggrad.tensor(x).mvlgamma(3).numpy(), expected, rtol=1e-5)
    y = ggrad.tensor(x)
    y.mvlgamma_(p=3)
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5)
