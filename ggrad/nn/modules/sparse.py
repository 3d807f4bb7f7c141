"""PyTorch's `torch.nn.modules.sparse` path: the embeddings."""

from ..sparse import Embedding
from ..embedding_bag import EmbeddingBag

__all__ = ["Embedding", "EmbeddingBag"]
