"""`Embedding`: a lookup table of learnable vectors."""

import numpy as np

from ..autograd import Tensor, no_grad
from ..autograd.factory import empty, tensor
from ..ggml.errors import ShapeError
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


class Embedding(Module):
    """A table of `num_embeddings` learnable vectors of size `embedding_dim`, looked up by index.

    y[..., :] = weight[index[...], :]

    Args:
        num_embeddings (int): size of the table.
        embedding_dim (int): size of each vector.
        padding_idx (int, optional): this row is initialised to zeros and never receives a gradient.
        device, dtype (optional): where the table lives and its dtype.

    Shape: integer indices (*) -> (*, embedding_dim).
    Init: weight ~ N(0, 1), as PyTorch.
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, device=None, dtype=None):
        super().__init__()
        for name, value in (("num_embeddings", num_embeddings), ("embedding_dim", embedding_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"Embedding: {name} must be a positive integer, got {value!r}")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx {padding_idx} must be within num_embeddings "
                                 f"({num_embeddings})")
            padding_idx %= num_embeddings
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.weight = Parameter(empty(num_embeddings, embedding_dim, dtype=dtype, device=device))
        self.reset_parameters()

    def reset_parameters(self):
        init.normal_(self.weight)
        self._zero_padding_row()

    def _zero_padding_row(self):
        if self.padding_idx is None:
            return
        rows = np.zeros((self.num_embeddings, 1), dtype=np.float32)
        rows[self.padding_idx] = 1.0
        with no_grad():
            self.weight.copy_(self.weight.masked_fill(tensor(rows, device=self.weight.device), 0.0))

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None):
        """An Embedding holding a copy of the 2-D `embeddings` (frozen unless freeze=False)."""
        if embeddings.ndim != 2:
            raise ShapeError(f"Embedding.from_pretrained: embeddings must be 2-D, got shape {tuple(embeddings.shape)}")
        rows, dim = embeddings.shape
        layer = cls(rows, dim, padding_idx=padding_idx)
        with no_grad():
            source = embeddings if isinstance(embeddings, Tensor) else tensor(np.asarray(embeddings, np.float32))
            layer.weight.copy_(source.detach().clone())
        layer.weight.requires_grad_(not freeze)
        return layer

    def forward(self, index):
        if isinstance(index, Tensor) and index.dtype.is_float:
            raise TypeError(f"Embedding: indices must be an integer tensor (ggrad.int32), got {index.dtype.name}")
        return F.embedding(index, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s if self.padding_idx is None else s + f", padding_idx={self.padding_idx}"
