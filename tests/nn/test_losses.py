"""Loss modules against numpy references (values, finite-difference gradients) and PyTorch when installed."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
from gradcheck_util import check

RNG = np.random.default_rng(3)




def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def reduce(loss, reduction):
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def log_softmax(x, axis=1):
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def np_cross_entropy(x, y, weight=None, ignore_index=-100, reduction="mean", smoothing=0.0):
    c = x.shape[1]
    logp = log_softmax(x)
    w = np.ones(c) if weight is None else weight
    valid = y != ignore_index
    safe = np.where(valid, y, 0)
    picked = np.take_along_axis(logp, safe[:, None], 1)[:, 0]
    nll = -picked * w[safe] * valid
    smooth = -(logp * w).sum(1) / c * valid
    loss = (1 - smoothing) * nll + smoothing * smooth
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / (w[safe] * valid).sum()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(reduction):
    x, y = randn(4, 3), randn(4, 3)
    cases = [
        (nn.MSELoss(reduction), lambda a, b: reduce((a - b) ** 2, reduction)),
        (nn.L1Loss(reduction), lambda a, b: reduce(np.abs(a - b), reduction)),
        (nn.HuberLoss(reduction, delta=0.7),
         lambda a, b: reduce(np.where(np.abs(a - b) < 0.7, 0.5 * (a - b) ** 2, 0.7 * (np.abs(a - b) - 0.35)),
                             reduction)),
        (nn.SmoothL1Loss(reduction, beta=0.5),
         lambda a, b: reduce(np.where(np.abs(a - b) < 0.5, 0.5 * (a - b) ** 2 / 0.5, np.abs(a - b) - 0.25),
                             reduction)),
    ]
    for loss, ref in cases:
        check(loss, ref, [x, y])


@pytest.mark.parametrize("kwargs", [{}, {"reduction": "sum"}, {"reduction": "none"}, {"ignore_index": 1},
                                    {"weight": [0.5, 2.0, 1.0, 0.1]}, {"label_smoothing": 0.2},
                                    {"weight": [0.5, 2.0, 1.0, 0.1], "ignore_index": 0},
                                    {"weight": [0.5, 2.0, 1.0, 0.1], "label_smoothing": 0.1}])
def test_cross_entropy_loss(kwargs):
    loss = nn.CrossEntropyLoss(**kwargs)
    weight = None if "weight" not in kwargs else np.array(kwargs["weight"])
    y = np.array([0, 3, 1, 1, 2])

    def ref(x, t):
        return np_cross_entropy(x, t, weight, kwargs.get("ignore_index", -100), kwargs.get("reduction", "mean"),
                                kwargs.get("label_smoothing", 0.0))

    check(loss, ref, [randn(5, 4), y])
    if weight is not None:
        assert [n for n, _ in loss.named_buffers()] == ["weight"]


def test_cross_entropy_with_spatial_dims_and_probabilities():
    y = np.array([[0, 2], [1, 1]])

    def ref(x, t):  # (N, C, d) -> rows
        return np_cross_entropy(x.transpose(0, 2, 1).reshape(-1, 3), t.reshape(-1))

    check(nn.CrossEntropyLoss(), ref, [randn(2, 3, 2), y])
    probs = np.abs(randn(4, 3))
    probs /= probs.sum(1, keepdims=True)
    check(lambda x: nn.CrossEntropyLoss()(x, ggrad.tensor(probs)),
          lambda x: -(probs * log_softmax(x)).sum(1).mean(), [randn(4, 3)])


def test_nll_loss():
    y = np.array([2, 0, 1])
    check(nn.NLLLoss(), lambda x, t: -x[np.arange(3), t].mean(), [randn(3, 4), y])
    w = np.array([1.0, 2.0, 3.0, 4.0])
    check(nn.NLLLoss(weight=w, reduction="sum"), lambda x, t: -(x[np.arange(3), t] * w[t]).sum(), [randn(3, 4), y])


def test_binary_cross_entropy_losses():
    y = (RNG.random((4, 3)) < 0.5).astype(np.float32)

    def sigmoid(z):
        return 1 / (1 + np.exp(-z))

    def bce(p, t, w=1.0):
        return -(w * (t * np.log(p) + (1 - t) * np.log(1 - p)))

    check(lambda x: nn.BCEWithLogitsLoss()(x, ggrad.tensor(y)), lambda x: bce(sigmoid(x), y).mean(), [randn(4, 3)])
    pos = np.array([1.0, 2.0, 0.5])
    check(lambda x: nn.BCEWithLogitsLoss(pos_weight=pos, reduction="sum")(x, ggrad.tensor(y)),
          lambda x: -(pos * y * np.log(sigmoid(x)) + (1 - y) * np.log(1 - sigmoid(x))).sum(), [randn(4, 3)])
    p = RNG.uniform(0.05, 0.95, (4, 3))
    w = RNG.uniform(0.5, 1.5, (4, 3))
    check(lambda q: nn.BCELoss(weight=w)(q, ggrad.tensor(y)), lambda q: bce(q, y, w).mean(), [p])


@pytest.mark.parametrize("smoothing", [0.0, 0.15])
def test_cross_entropy_matches_torch(smoothing):
    torch = pytest.importorskip("torch")
    x, y = randn(6, 5), RNG.integers(0, 5, 6)
    y[2] = 3
    w = np.abs(randn(5)) + 0.1
    ours = nn.CrossEntropyLoss(weight=w, ignore_index=3, label_smoothing=smoothing)
    theirs = torch.nn.CrossEntropyLoss(weight=torch.tensor(w), ignore_index=3, label_smoothing=smoothing)
    np.testing.assert_allclose(ours(ggrad.tensor(x), ggrad.tensor(y)).item(),
                               theirs(torch.tensor(x), torch.tensor(y)).item(), rtol=1e-5)


def test_losses_match_torch():
    torch = pytest.importorskip("torch")
    a, b = randn(3, 4), randn(3, 4)
    for mine, ref in ((nn.HuberLoss(delta=0.5), torch.nn.HuberLoss(delta=0.5)),
                      (nn.SmoothL1Loss(beta=0.5), torch.nn.SmoothL1Loss(beta=0.5)),
                      (nn.BCEWithLogitsLoss(), torch.nn.BCEWithLogitsLoss())):
        target = (b > 0).astype(np.float32) if isinstance(mine, nn.BCEWithLogitsLoss) else b
        np.testing.assert_allclose(mine(ggrad.tensor(a), ggrad.tensor(target)).item(),
                                   ref(torch.tensor(a), torch.tensor(target)).item(), rtol=1e-5, err_msg=repr(mine))


def test_loss_arguments_and_reprs():
    with pytest.raises(ValueError, match="reduction must be one of"):
        nn.MSELoss(reduction="avg")
    with pytest.raises(ValueError, match="delta must be positive"):
        nn.HuberLoss(delta=0)
    assert repr(nn.MSELoss()) == "MSELoss()"
    assert repr(nn.L1Loss("sum")) == "L1Loss(reduction='sum')"
    assert repr(nn.HuberLoss(delta=2.0)) == "HuberLoss(reduction='mean', delta=2.0)"
    with pytest.raises(ggrad.ShapeError, match="cross_entropy: expected target of shape"):
        nn.CrossEntropyLoss()(ggrad.randn(4, 3), ggrad.tensor([0, 1]))


@pytest.mark.parametrize("kwargs", [{}, {"reduction": "sum"}, {"ignore_index": 2}, {"label_smoothing": 0.1},
                                    {"ignore_index": 0, "label_smoothing": 0.2}])
def test_fused_cross_entropy_matches_torch_with_gradients(kwargs):
    """Class-index targets without class weights take GGML's fused cross_entropy_loss_back for the gradient;
    the forward sums rows in a fixed order, not by GGML's cross_entropy_loss (its sum follows the thread
    count: tests/reliability/test_thread_count.py)."""
    torch = pytest.importorskip("torch")
    x, y = randn(8, 5), RNG.integers(0, 5, 8)
    y[1] = kwargs.get("ignore_index", 0)
    logits = ggrad.tensor(x.astype(np.float32), requires_grad=True)
    with ggrad.profile() as prof:
        loss = ggrad.cross_entropy(logits, ggrad.tensor(y), **kwargs)
        loss.backward()
        value, grad = loss.item(), logits.grad.numpy()
    assert "CROSS_ENTROPY_LOSS_BACK" in prof.by_op() and "CROSS_ENTROPY_LOSS" not in prof.by_op()
    tx = torch.tensor(x, requires_grad=True)
    ref = torch.nn.functional.cross_entropy(tx, torch.tensor(y), **kwargs)
    ref.backward()
    np.testing.assert_allclose(value, ref.item(), rtol=1e-5)
    np.testing.assert_allclose(grad, tx.grad.numpy(), atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("pos_weight", [None, [1.0, 2.0, 0.5, 3.0]])
def test_bce_with_logits_at_zero_and_far_logits_matches_torch(pos_weight):
    """The gradient at a logit of exactly 0 is sigmoid(0) - y (a |x|-based stable form loses it there)."""
    torch = pytest.importorskip("torch")
    x = np.array([[0.0, 0.3, -0.3, 0.0], [100.0, -100.0, 30.0, -30.0]], np.float32)
    y = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 0.5, 0.2]], np.float32)
    out = []
    for T in (torch, ggrad):
        xt = T.tensor(x, requires_grad=True)
        pw = None if pos_weight is None else T.tensor(pos_weight)
        loss = T.nn.functional.binary_cross_entropy_with_logits(xt, T.tensor(y), pos_weight=pw, reduction="none")
        loss.sum().backward()
        out.append((loss.detach().numpy(), xt.grad.numpy()))
    np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1][1], out[0][1], rtol=1e-5, atol=1e-6)
