"""CTCLoss / F.ctc_loss against PyTorch: values and gradients for padded and joined targets, varying input and
target lengths, repeated labels, a blank other than 0, every reduction, unbatched input, empty targets,
impossible alignments (inf, or 0 with zero_infinity), and gradients taken through log_softmax."""

import numpy as np
import pytest

import ggrad
from ggrad import nn
from ggrad.nn import functional as F

torch = pytest.importorskip("torch")


def _inputs(steps, n, classes, seed, through_softmax):
    logits = np.random.default_rng(seed).standard_normal((steps, n, classes)).astype(np.float32)
    if through_softmax:
        g, t = ggrad.tensor(logits, requires_grad=True), torch.tensor(logits, requires_grad=True)
        return g, t, g.log_softmax(2), t.log_softmax(2)
    lp = torch.tensor(logits).log_softmax(2).numpy()
    g, t = ggrad.tensor(lp, requires_grad=True), torch.tensor(lp, requires_grad=True)
    return g, t, g, t


CASES = [  # (T, C, targets per sample, input lengths, blank)
    (12, 5, [[1, 2, 2, 3], [4, 1], [3, 3, 3]], [12, 10, 9], 0),
    (8, 4, [[1, 1], [2, 3, 1], [], [3]], [8, 8, 5, 1], 0),
    (10, 6, [[0, 1, 2], [4, 4], [3]], [10, 7, 3], 5),
    (5, 4, [[1, 1, 1], [1, 2, 3, 1, 2, 3], [2]], [5, 5, 5], 0),       # a repeat needs 5 steps; 6 labels can't fit
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("layout", ["padded", "joined"])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_values_and_gradients(case, reduction, layout, zero_infinity):
    steps, classes, rows, lengths, blank = CASES[case]
    through = case % 2 == 1
    g, t, glp, tlp = _inputs(steps, len(rows), classes, case, through)
    target_lengths = [len(r) for r in rows]
    if layout == "padded":
        width = max(target_lengths)
        targets = np.array([r + [1] * (width - len(r)) for r in rows], np.int64)
    else:
        targets = np.array([v for r in rows for v in r], np.int64)
    ours = F.ctc_loss(glp, ggrad.tensor(targets), ggrad.tensor(lengths), ggrad.tensor(target_lengths), blank,
                      reduction, zero_infinity)
    theirs = torch.nn.functional.ctc_loss(tlp, torch.tensor(targets), torch.tensor(lengths),
                                          torch.tensor(target_lengths), blank, reduction, zero_infinity)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-5)
    if not np.isfinite(theirs.detach().numpy()).all():
        return   # an infinite loss's gradient is not compared
    weights = np.random.default_rng(7).uniform(0.5, 1.5, tuple(theirs.shape)).astype(np.float32)
    (ours * ggrad.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_module_unbatched_and_lists():
    g, t, glp, tlp = _inputs(7, 1, 4, 3, False)
    loss = nn.CTCLoss(blank=0, reduction="sum")
    ours = loss(glp[:, 0], ggrad.tensor([1, 2, 2]), 7, 3)
    theirs = torch.nn.CTCLoss(reduction="sum")(tlp[:, 0], torch.tensor([1, 2, 2]), torch.tensor(7), torch.tensor(3))
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-5)
    ours = F.ctc_loss(glp, [[3, 1]], (6,), (2,), reduction="none")
    theirs = torch.nn.functional.ctc_loss(tlp, torch.tensor([[3, 1]]), (6,), (2,), reduction="none")
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-5)


def test_input_lengths_longer_than_the_input_raise_as_pytorch():
    lp = np.zeros((4, 1, 3), np.float32)
    with pytest.raises(RuntimeError):
        torch.nn.functional.ctc_loss(torch.tensor(lp), torch.tensor([[1]]), [5], [1])
    with pytest.raises(RuntimeError, match="at most 4"):
        F.ctc_loss(ggrad.tensor(lp), ggrad.tensor([[1]]), [5], [1])
