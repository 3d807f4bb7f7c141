"""PyTorch's `torch.nn.modules.sparse` path: the embeddings."""

from ..sparse import Embedding

__all__ = ["Embedding"]
