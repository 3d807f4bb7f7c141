"""PyTorch's `torch.nn.modules.distance` path: the distances and similarities."""

from ..similarity import PairwiseDistance, CosineSimilarity

__all__ = ["PairwiseDistance", "CosineSimilarity"]
