"""`ctc_loss` (F.ctc_loss): the connectionist temporal classification loss, composed of ggrad ops in one graph.

The forward (alpha) recursion runs over the extended labels (blank, l1, blank, l2, ..., blank) of every
sample at once, in log space: one logsumexp of the three predecessors (same, previous, and the one two back
where the label differs from it and is not blank) plus the emission, per time step, held where a sample's
input has ended. Impossible alignments sit at a finite -1e30 instead of -inf (so no NaN reaches the
gradients) and come out as an infinite loss. Autograd differentiates the recursion; as PyTorch's kernel does,
the gradient with respect to `log_probs` also carries exp(log_probs) for t < input_length (its backward
assumes log_softmax inputs, through which that term cancels), so gradients equal PyTorch's either way.
"""

import numpy as np

from ...ggml.errors import ShapeError
from ..factory import tensor
from ..tensor import Tensor
from .joins import stack
from .reduce import logsumexp
from .selection import where
from .shape_ops import pad

_IMPOSSIBLE = -1e30   # log-probability of no alignment: finite, so the recursion's gradients stay finite


def _host_ints(value, name):
    array = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
    if array.dtype.kind not in "iu":
        raise RuntimeError(f"ctc_loss: {name} must be integers, got {array.dtype}")
    return array.astype(np.int64)


def _extended_labels(targets, target_lengths, n, blank):
    """(N, 2 L + 1) labels with blanks between and around each sample's targets, and where a skip of two
    positions is allowed (the label differs from the one two back and is not blank)."""
    if targets.ndim == 2:
        rows = [targets[i, :target_lengths[i]] for i in range(n)]
    else:
        ends = np.cumsum(target_lengths)
        rows = [targets[end - length:end] for end, length in zip(ends, target_lengths)]
    width = 2 * int(target_lengths.max(initial=0)) + 1
    labels = np.full((n, width), blank, np.int64)
    for i, row in enumerate(rows):
        labels[i, 1:2 * len(row):2] = row
    skip = np.zeros((n, width), bool)
    skip[:, 2:] = (labels[:, 2:] != blank) & (labels[:, 2:] != labels[:, :-2])
    return labels, skip


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """CTC loss of `log_probs` (T, N, C) (or unbatched (T, C)), log-softmax outputs, against `targets`: padded
    (N, S) or all samples' targets joined (sum(target_lengths),), with each sample's `input_lengths` and
    `target_lengths`. reduction: 'mean' (each loss over its target length, then the batch mean), 'sum' or
    'none'. zero_infinity: impossible alignments give 0 and no gradient instead of inf."""
    if not isinstance(log_probs, Tensor) or log_probs.ndim not in (2, 3):
        shape = tuple(log_probs.shape) if isinstance(log_probs, Tensor) else type(log_probs).__name__
        raise ShapeError(f"ctc_loss: log_probs must be (T, N, C) or unbatched (T, C), got {shape}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    steps, n, classes = lp.shape
    targets = _host_ints(targets, "targets")
    input_lengths = _host_ints(input_lengths, "input_lengths").reshape(-1)
    target_lengths = _host_ints(target_lengths, "target_lengths").reshape(-1)
    if unbatched:
        targets = targets.reshape(1, -1)
    if not 0 <= blank < classes:
        raise RuntimeError(f"ctc_loss: blank must be in label range [0, {classes}), got {blank}")
    if len(input_lengths) != n or len(target_lengths) != n:
        raise RuntimeError(f"ctc_loss: expected input_lengths and target_lengths of size {n} (the batch), got "
                           f"{len(input_lengths)} and {len(target_lengths)}")
    if (input_lengths > steps).any() or (input_lengths < 0).any():
        raise RuntimeError(f"Expected input_lengths to have value at most {steps}, but got value "
                           f"{int(input_lengths.max())}")
    width = targets.shape[1] if targets.ndim == 2 else int(target_lengths.sum())
    if (target_lengths < 0).any() or (targets.ndim == 2 and (target_lengths > width).any()) or \
            (targets.ndim == 1 and len(targets) < width):
        raise RuntimeError(f"ctc_loss: target_lengths {target_lengths.tolist()} do not fit targets of shape "
                           f"{targets.shape}")
    labels, skip = _extended_labels(targets, target_lengths, n, blank)
    if (labels < 0).any() or (labels >= classes).any():
        raise RuntimeError(f"ctc_loss: targets must be class indices in [0, {classes})")
    device = lp.device
    lp = lp.float()
    emissions = lp.gather(2, tensor(labels, device=device).unsqueeze(0).expand(steps, n, labels.shape[1]))
    skip_add = tensor(np.where(skip, 0.0, _IMPOSSIBLE).astype(np.float32), device=device)
    start = np.zeros(labels.shape, bool)
    start[:, 0] = True
    start[:, 1] = target_lengths > 0
    alpha = where(tensor(start, device=device), emissions[0], _IMPOSSIBLE)
    for t in range(1, int(input_lengths.max(initial=0))):
        if labels.shape[1] == 1:   # every target empty: blanks only
            step = alpha + emissions[t]
        else:
            one_back = pad(alpha[:, :-1], (1, 0), value=_IMPOSSIBLE)
            two_back = pad(alpha[:, :-2], (2, 0), value=_IMPOSSIBLE) + skip_add
            step = logsumexp(stack([alpha, one_back, two_back]), 0) + emissions[t]
        alpha = where(tensor((t < input_lengths)[:, None], device=device), step, alpha)
    ends = np.stack([2 * target_lengths, np.maximum(2 * target_lengths - 1, 0)], 1)
    last = alpha.gather(1, tensor(ends, device=device))
    last = where(tensor(np.stack([np.ones(n, bool), target_lengths > 0], 1), device=device), last, _IMPOSSIBLE)
    nll = -logsumexp(last, 1)
    if (input_lengths == 0).any():   # no time step at all: only an empty target is possible
        value = np.where(target_lengths == 0, 0.0, -_IMPOSSIBLE).astype(np.float32)
        nll = where(tensor(input_lengths == 0, device=device), tensor(value, device=device), nll)
    impossible = nll > -_IMPOSSIBLE / 10
    # PyTorch's gradient: + exp(log_probs) where t < input_length (zero value, see the module docstring)
    live = tensor((np.arange(steps)[:, None] < input_lengths[None, :])[:, :, None].astype(np.float32), device=device)
    probs = lp.exp() * live
    nll = nll + (probs - probs.detach()).sum((0, 2))
    losses = where(impossible, 0.0 if zero_infinity else float("inf"), nll)
    if reduction == "none":
        return losses.squeeze(0) if unbatched else losses
    if reduction == "sum":
        return losses.sum()
    return (losses / tensor(np.maximum(target_lengths, 1).astype(np.float32), device=device)).mean()
