"""`Embedding`: a lookup table of learnable vectors."""

import numpy as np

from ..autograd import Tensor
from ..autograd.factory import empty, generator
from ..ggml.errors import ShapeError
from . import functional as F
from . import init
from .module import Module
from ..autograd import Parameter


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
        """weight ~ N(0, 1), the padding row zero (drawn on the host: the weight stays a leaf)."""
        values = generator().normal(0.0, 1.0, size=self.weight.shape)
        if self.padding_idx is not None:
            values[self.padding_idx] = 0.0
        init._fill(self.weight, values)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None):
        """An Embedding holding a copy of the 2-D `embeddings` (frozen unless freeze=False)."""
        values = embeddings.detach().numpy() if isinstance(embeddings, Tensor) else np.asarray(embeddings)
        if values.ndim != 2:
            raise ShapeError(f"Embedding.from_pretrained: embeddings must be 2-D, got shape {values.shape}")
        layer = cls(values.shape[0], values.shape[1], padding_idx=padding_idx)
        init._fill(layer.weight, values)
        layer.weight.requires_grad_(not freeze)
        return layer

    def forward(self, index):
        if isinstance(index, Tensor) and index.dtype.is_float:
            raise TypeError(f"Embedding: indices must be an integer tensor (ggrad.int32), got {index.dtype.name}")
        return F.embedding(index, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s if self.padding_idx is None else s + f", padding_idx={self.padding_idx}"
