"""`EmbeddingBag` and `F.embedding_bag`: the sum, mean or max of the embeddings of each bag of indices, without
making the (bags, length, dim) tensor of their lookups first where it can be avoided (PyTorch's nn.EmbeddingBag).

Bags are the rows of a 2-D input, or the runs of a 1-D input that start at `offsets` (read on the host, as they
fix the output's structure). sum and mean add each lookup into its bag's row (one index_add); max gathers the
bags padded to the longest and takes the maximum, so its gradient goes to the rows that gave it. Indices equal
to `padding_idx` are left out of every bag (and of a mean's count); an empty bag gives zeros.
"""

import math

import numpy as np

from ..autograd import Parameter, Tensor
from ..autograd.arguments import TENSOR, require
from ..autograd.factory import empty, generator, tensor, zeros
from ..autograd.ops import amax, where
from ..autograd.ops.scatter_ops import index_add
from ..ggml.errors import ShapeError
from . import init
from .module import Module

__all__ = ["EmbeddingBag", "embedding_bag"]
_MODES = ("sum", "mean", "max")


def _bags(input, offsets, include_last_offset):
    """(flat indices as numpy, bag of each index, number of bags)."""
    indices = input.numpy().astype(np.int64)
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             "fixed length sequences.")
        bags, length = indices.shape
        return indices.reshape(-1), np.repeat(np.arange(bags), length), bags
    if input.ndim != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    starts = offsets.numpy().astype(np.int64) if isinstance(offsets, Tensor) else np.asarray(offsets, np.int64)
    if starts.ndim != 1:
        raise ValueError("offsets has to be a 1D Tensor")
    if starts.size and (starts[0] != 0 or (np.diff(starts) < 0).any() or starts[-1] > indices.size):
        raise RuntimeError("offsets must start at 0, not decrease, and stay within the input")
    bounds = starts if include_last_offset else np.append(starts, indices.size)
    bags = len(bounds) - 1
    return indices, np.repeat(np.arange(bags), np.diff(bounds)), bags


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,  # noqa: A002
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """The bags' reduced embeddings, (bags, dim). `max_norm`, `scale_grad_by_freq` and `sparse` change the
    lookups' gradient or the table in PyTorch: ggrad refuses the first two and gives a dense gradient."""
    require("embedding_bag", "input", input, TENSOR)
    require("embedding_bag", "weight", weight, TENSOR)
    if mode not in _MODES:
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
    if max_norm is not None or scale_grad_by_freq:
        raise ValueError("embedding_bag: max_norm and scale_grad_by_freq are not supported by ggrad")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
                                  f"GitHub.")
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if input.dtype.is_float:
        raise RuntimeError(f"embedding_bag: expected input of an integer dtype, got {input.dtype!r}")
    flat, bag_of, bags = _bags(input, offsets, include_last_offset)
    if per_sample_weights is not None and tuple(per_sample_weights.shape) != tuple(input.shape):
        raise ShapeError(f"embedding_bag: per_sample_weights {tuple(per_sample_weights.shape)} must have the "
                         f"input's shape {tuple(input.shape)}")
    keep = np.ones(flat.size, bool) if padding_idx is None else flat != padding_idx % weight.shape[0]
    dim = weight.shape[1]
    if mode == "max":
        return _bag_max(weight, flat, bag_of, bags, keep)
    rows = weight[tensor(flat[keep], device=weight.device)] if keep.any() else zeros(0, dim, device=weight.device)
    if per_sample_weights is not None:
        w = per_sample_weights.reshape(-1)[tensor(np.flatnonzero(keep), device=weight.device)]
        rows = rows * w.unsqueeze(-1)
    out = index_add(zeros(bags, dim, dtype=weight.dtype, device=weight.device), 0,
                    tensor(bag_of[keep], device=weight.device), rows)
    if mode == "mean":
        counts = np.bincount(bag_of[keep], minlength=bags).astype(np.float32)
        out = out / tensor(np.maximum(counts, 1.0)[:, None], device=weight.device)
    return out


def _bag_max(weight, flat, bag_of, bags, keep):
    """The elementwise maximum of each bag's rows: the bags padded to the longest, the padding at -inf."""
    counts = np.bincount(bag_of[keep], minlength=bags)
    longest = int(counts.max()) if counts.size else 0
    if longest == 0:
        return zeros(bags, weight.shape[1], dtype=weight.dtype, device=weight.device)
    slots = np.zeros((bags, longest), np.int64)
    filled = np.zeros((bags, longest), bool)
    position = np.zeros(bags, np.int64)
    for index, bag in zip(flat[keep], bag_of[keep]):
        slots[bag, position[bag]], filled[bag, position[bag]] = index, True
        position[bag] += 1
    rows = weight[tensor(slots, device=weight.device)]                    # (bags, longest, dim)
    present = tensor(filled[:, :, None], device=weight.device)
    best = amax(where(present, rows, -math.inf), 1)
    return where(tensor(counts[:, None] > 0, device=weight.device), best, 0.0)


class EmbeddingBag(Module):
    """A table of `num_embeddings` vectors of `embedding_dim`; forward(input, offsets, per_sample_weights)
    reduces each bag's vectors by `mode` ("sum", "mean" or "max").

    Args:
        num_embeddings (int), embedding_dim (int): the table's size.
        mode (str): "sum", "mean" or "max". Default: "mean".
        include_last_offset (bool): offsets has one more entry, the end of the last bag. Default: False.
        padding_idx (int, optional): an index left out of every bag (its row starts at zero).
        max_norm, norm_type, scale_grad_by_freq, sparse: as embedding_bag takes them.
    """

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None, device=None,
                 dtype=None):
        super().__init__()
        if mode not in _MODES:
            raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
        self.num_embeddings, self.embedding_dim, self.mode = num_embeddings, embedding_dim, mode
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        self.include_last_offset = include_last_offset
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is not None:
            self.weight = Parameter(_weight)
        else:
            self.weight = Parameter(empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
            values = generator().normal(0.0, 1.0, size=self.weight.shape)   # N(0, 1), the padding row zero
            if padding_idx is not None:
                values[padding_idx] = 0.0
            init._fill(self.weight, values)

    def forward(self, input, offsets=None, per_sample_weights=None):  # noqa: A002 (PyTorch's name)
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                             self.mode, self.sparse, per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        extra = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}, mode='{self.mode}'{extra}"
