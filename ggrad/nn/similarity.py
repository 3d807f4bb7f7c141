"""Distances and similarities between vectors, as PyTorch's F.normalize, F.cosine_similarity and
F.pairwise_distance (built from norms: their gradients follow from the ops), and the layers
CosineSimilarity and PairwiseDistance."""

from __future__ import annotations

from ..autograd import Tensor, ops
from .module import Module

__all__ = ["normalize", "cosine_similarity", "pairwise_distance", "CosineSimilarity", "PairwiseDistance"]


def _tensors(op, *xs):
    for x in xs:
        if not isinstance(x, Tensor):
            raise TypeError(f"{op}(): expected Tensor inputs, got {type(x).__name__}")


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:  # noqa: A002
    """input / max(||input||_p over dim, eps): unit vectors along `dim`."""
    _tensors("normalize", input)
    if isinstance(p, Tensor):
        raise TypeError("normalize(): p must be a number, not Tensor")
    return input / ops.clamp(ops.norm(input, p, dim, keepdim=True), min=eps)


def _clamped_norm(x, dim, eps):
    """||x||_2 over dim (kept) with its value clamped at eps and its gradient unclamped, as PyTorch clamps
    the norm under no_grad."""
    n = ops.norm(x, 2, dim, keepdim=True)
    floor = n.detach()
    return n + (ops.clamp(floor, min=eps) - floor)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """sum(x1/||x1|| * x2/||x2||) over `dim` (inputs broadcast; each norm at least eps)."""
    _tensors("cosine_similarity", x1, x2)
    shape = ops.broadcast_shapes(x1.shape, x2.shape, "cosine_similarity")
    x1, x2 = x1.expand(shape), x2.expand(shape)
    return ops.sum((x1 / _clamped_norm(x1, dim, eps)) * (x2 / _clamped_norm(x2, dim, eps)), dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """||x1 - x2 + eps||_p over the last dimension."""
    _tensors("pairwise_distance", x1, x2)
    return ops.norm(x1 - x2 + eps, p, -1, keepdim=keepdim)


class CosineSimilarity(Module):
    """cosine_similarity(x1, x2, dim, eps) as a layer.

    Args:
        dim (int, default 1): the dimension the vectors lie along.
        eps (float, default 1e-8): the smallest norm divided by.
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """pairwise_distance(x1, x2, p, eps, keepdim) as a layer.

    Args:
        p (float, default 2.0): the norm's order.
        eps (float, default 1e-6): added to the difference (keeps the norm's gradient finite at 0).
        keepdim (bool, default False): keep the reduced last dimension.
    """

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
