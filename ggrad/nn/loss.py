"""Losses as modules: MSELoss, L1Loss, HuberLoss, SmoothL1Loss, CrossEntropyLoss, NLLLoss,
BCEWithLogitsLoss, BCELoss, KLDivLoss. Each calls its function in `ggrad.nn.functional`: `loss(input, target)`."""

import numpy as np

from ..autograd import Tensor
from ..autograd.factory import tensor
from . import functional as F
from .module import Module

_REDUCTIONS = ("mean", "sum", "none")


class _Loss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise ValueError(f"{type(self).__name__}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
        self.reduction = reduction

    def _weight(self, name, value):
        """Register a class/element weight as a buffer (as PyTorch does), converting arrays to Tensors."""
        if value is not None and not isinstance(value, Tensor):
            value = tensor(np.asarray(value, dtype=np.float32))
        self.register_buffer(name, value)

    def extra_repr(self):
        return f"reduction={self.reduction!r}" if self.reduction != "mean" else ""


class MSELoss(_Loss):
    """Mean squared error.

    loss = reduce((input - target)^2)

    Args:
        reduction (str, default 'mean'): 'mean', 'sum' or 'none'.
    """

    def forward(self, input, target):
        return F.mse_loss(input, target, self.reduction)


class L1Loss(_Loss):
    """Mean absolute error.

    loss = reduce(|input - target|)

    Args:
        reduction (str, default 'mean'): 'mean', 'sum' or 'none'.
    """

    def forward(self, input, target):
        return F.l1_loss(input, target, self.reduction)


class HuberLoss(_Loss):
    """Huber loss: quadratic near zero, linear beyond delta.

    loss = reduce(0.5 d^2 if |d| < delta else delta (|d| - 0.5 delta)),  d = input - target

    Args:
        reduction (str, default 'mean'): 'mean', 'sum' or 'none'.
        delta (float, default 1.0): where the quadratic part ends.
    """

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction)
        if delta <= 0:
            raise ValueError(f"HuberLoss: delta must be positive, got {delta}")
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, self.reduction, self.delta)

    def extra_repr(self):
        return f"reduction={self.reduction!r}, delta={self.delta}"


class SmoothL1Loss(_Loss):
    """Smooth L1 loss: Huber loss divided by beta.

    loss = reduce(0.5 d^2 / beta if |d| < beta else |d| - 0.5 beta),  d = input - target

    Args:
        reduction (str, default 'mean'): 'mean', 'sum' or 'none'.
        beta (float, default 1.0): where the quadratic part ends.
    """

    def __init__(self, reduction="mean", beta=1.0):
        super().__init__(reduction)
        if beta <= 0:
            raise ValueError(f"SmoothL1Loss: beta must be positive, got {beta}")
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, self.reduction, self.beta)

    def extra_repr(self):
        return f"reduction={self.reduction!r}, beta={self.beta}"


class CrossEntropyLoss(_Loss):
    """Cross-entropy between logits and class indices (or class probabilities).

    loss_n = -w[y_n] log softmax(x_n)[y_n];  'mean' divides by sum_n w[y_n] over non-ignored n

    Args:
        weight (Tensor or array of shape (C,), optional): per-class weight.
        ignore_index (int, default -100): targets equal to it contribute nothing.
        reduction (str, default 'mean'): 'mean', 'sum' or 'none'.
        label_smoothing (float, default 0.0): mix the targets with the uniform distribution.

    Shape: input (N, C) or (N, C, d1, ...) LOGITS; target (N,) / (N, d1, ...) int32, or probabilities
    shaped like the input.
    """

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        self._weight("weight", weight)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction, self.label_smoothing)


class NLLLoss(_Loss):
    """Negative log-likelihood of log-probabilities at class indices.

    loss_n = -w[y_n] input[n, y_n];  'mean' divides by sum_n w[y_n] over non-ignored n

    Args:
        weight (Tensor or array of shape (C,), optional): per-class weight.
        ignore_index (int, default -100): targets equal to it contribute nothing.
        reduction (str, default 'mean'): 'mean', 'sum' or 'none'.
    """

    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(reduction)
        self._weight("weight", weight)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy on logits (a sigmoid folded in, computed stably).

    loss = reduce(-w [p y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))]),  p = pos_weight

    Args:
        weight (Tensor or array, optional): per-element weight, broadcast against the input.
        reduction (str, default 'mean'): 'mean', 'sum' or 'none'.
        pos_weight (Tensor or array, optional): weight of the positive term, per class.
    """

    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        super().__init__(reduction)
        self._weight("weight", weight)
        self._weight("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight, self.reduction, self.pos_weight)


class BCELoss(_Loss):
    """Binary cross-entropy on probabilities (logs clamped at -100, as PyTorch).

    loss = reduce(-w [y log p + (1 - y) log(1 - p)])

    Args:
        weight (Tensor or array, optional): per-element weight, broadcast against the input.
        reduction (str, default 'mean'): 'mean', 'sum' or 'none'.
    """

    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self._weight("weight", weight)

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, self.weight, self.reduction)


class KLDivLoss(Module):
    """Kullback-Leibler divergence of the target from log-probabilities `input` (F.kl_div).

    loss = reduce(target (log target - input)), or exp(t) (t - input) with log_target

    Args:
        reduction (str, default 'mean'): 'batchmean' (the true KL per sample), 'mean', 'sum' or 'none'.
        log_target (bool, default False): the target is given as log-probabilities.
    """

    def __init__(self, reduction="mean", log_target=False):
        super().__init__()
        if reduction not in _REDUCTIONS + ("batchmean",):
            raise ValueError(f"KLDivLoss: reduction must be one of {_REDUCTIONS + ('batchmean',)}, got {reduction!r}")
        self.reduction, self.log_target = reduction, log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)
