"""PyTorch's ranking, margin and likelihood losses as functions (torch.nn.functional's), composed from Tensor
ops: margin_ranking, soft_margin, hinge_embedding, cosine_embedding, triplet_margin (and with a distance
function), multilabel_soft_margin, multi_margin, poisson_nll, gaussian_nll. Their modules are in margin_loss_modules.
"""

from __future__ import annotations

import math

from ..autograd import grad_mode
from ..autograd.arguments import FLAG, TENSOR, require
from ..autograd.ops import clamp, logsigmoid, minimum, softplus, where
from ..ggml.errors import ShapeError
from .similarity import pairwise_distance

__all__ = ["margin_ranking_loss", "soft_margin_loss", "hinge_embedding_loss", "cosine_embedding_loss",
           "triplet_margin_loss", "triplet_margin_with_distance_loss", "multilabel_soft_margin_loss", "multi_margin_loss", "poisson_nll_loss",
           "gaussian_nll_loss"]


def _tensors(op, **named):
    """PyTorch's parse of a loss: these arguments are Tensors."""
    for name, value in named.items():
        require(op, name, value, TENSOR)


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction="mean"):
    """max(0, -y (x1 - x2) + margin): x1 should rank above x2 where y = 1, below where y = -1."""
    _tensors("margin_ranking_loss", input1=input1, input2=input2, target=target)
    return _reduce(clamp(-target * (input1 - input2) + margin, min=0.0), reduction)


def soft_margin_loss(input, target, reduction="mean"):  # noqa: A002 (PyTorch's names)
    """log(1 + exp(-y x)), for labels y in {1, -1}."""
    _tensors("soft_margin_loss", input=input, target=target)
    return _reduce(softplus(-target * input), reduction)


def hinge_embedding_loss(input, target, margin=1.0, reduction="mean"):  # noqa: A002
    """x where y = 1, max(0, margin - x) where y = -1 (both terms where y is neither)."""
    _tensors("hinge_embedding_loss", input=input, target=target)
    if not input.dtype.is_float:
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a floating point or "
                           f"complex dtype. Got: {input.type()[6:-6]}")
    beyond = where(target != 1, clamp(margin - input, min=0.0), 0.0)
    return _reduce(beyond + where(target != -1, input, 0.0), reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction="mean"):
    """1 - cos(x1, x2) where y = 1, max(0, cos(x1, x2) - margin) where y = -1 (cosine over the last dim)."""
    _tensors("cosine_embedding_loss", input1=input1, input2=input2, target=target)
    eps = 1e-12
    dot = (input1 * input2).sum(-1)
    cos = dot / (((input1 * input1).sum(-1) + eps) * ((input2 * input2).sum(-1) + eps)).sqrt()
    loss = where(target == 1, 1.0 - cos, 0.0) + where(target == -1, clamp(cos - margin, min=0.0), 0.0)
    return _reduce(loss, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0) with d the p-norm distance; `swap` uses min(d(a, n), d(p, n))."""
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ShapeError(f"triplet_margin_loss: anchor, positive and negative must have the same number of dims, "
                         f"got {anchor.ndim}, {positive.ndim}, {negative.ndim}")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(clamp(d_pos - d_neg + margin, min=0.0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0) for any distance function d (default: the pairwise 2-norm distance)."""
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: expected margin to be greater than 0, got {margin} "
                         "instead")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative "
                           f"{negative.ndim}D inputs")
    distance = pairwise_distance if distance_function is None else distance_function
    d_pos, d_neg = distance(anchor, positive), distance(anchor, negative)
    if swap:
        d_neg = minimum(d_neg, distance(positive, negative))
    return _reduce(clamp(d_pos - d_neg + margin, min=0.0), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, reduction="mean"):  # noqa: A002
    """-(y log sigmoid(x) + (1 - y) log sigmoid(-x)), weighted, averaged over the classes (last dim)."""
    _tensors("multilabel_soft_margin_loss", input=input, target=target)
    loss = -(target * logsigmoid(input) + (1.0 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss.mean(-1), reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, reduction="mean"):  # noqa: A002
    """Per sample: sum over classes i != y of max(0, margin - x[y] + x[i])^p / C (times weight[y])."""
    _tensors("multi_margin_loss", input=input, target=target)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    if target.ndim > 1 or target.numel() != x.shape[0] or x.shape[0] == 0:
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
                           f"samples (batch size), got target of shape {tuple(target.shape)} for input of shape "
                           f"{tuple(input.shape)}")
    if target.dtype.is_float:
        raise RuntimeError(f"multi_margin_loss: expected target of an integer dtype, got {target.dtype!r}")
    if target.numel() and (int(target.min().item()) < 0 or int(target.max().item()) >= x.shape[1]):
        raise RuntimeError("target out of range")
    y = target.reshape(-1, 1)
    picked = x.gather(1, y)
    terms = clamp(margin - picked + x, min=0.0)
    if p == 2:
        terms = terms * terms
    if weight is not None:
        terms = terms * weight[y.reshape(-1)].reshape(-1, 1)
    classes = x.shape[1]
    not_target = (x * 0.0).scatter(1, y, 1.0) * -1.0 + 1.0   # 0 at the target class, 1 elsewhere
    loss = (terms * not_target).sum(1) / classes
    return _reduce(loss if input.ndim == 2 else loss.reshape(()), reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,  # noqa: A002
                     reduce=None, reduction="mean"):
    """exp(x) - y x (log_input), else x - y log(x + eps); `full` adds Stirling's y log y - y + log(2 pi y) / 2
    where y > 1."""
    _tensors("poisson_nll_loss", input=input, target=target)
    require("poisson_nll_loss", "log_input", log_input, FLAG)
    require("poisson_nll_loss", "full", full, FLAG)
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        safe = clamp(target, min=1.0)
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + where(target > 1, stirling, 0.0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):  # noqa: A002
    """(log(max(var, eps)) + (x - y)^2 / max(var, eps)) / 2 (+ log(2 pi) / 2 with `full`); the clamp of var
    passes no gradient, as PyTorch's. `var` has input's shape, or one dim less, or a last dim of 1."""
    _tensors("gaussian_nll_loss", input=input, target=target)
    if hasattr(var, "shape") and var.shape != input.shape:
        if var.shape == input.shape[:-1]:
            var = var.unsqueeze(-1)
        elif not (var.ndim == input.ndim and var.shape[-1] == 1 and var.shape[:-1] == input.shape[:-1]):
            raise ValueError("var is of incorrect size")
    if (var < 0).any().item():
        raise ValueError("var has negative entry/entries")
    with grad_mode.no_grad():
        floor = clamp(var, min=eps) - var
    var = var + floor
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)
