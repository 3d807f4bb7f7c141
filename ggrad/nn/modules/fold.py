"""PyTorch's `torch.nn.modules.fold` path: Fold and Unfold."""

from ..fold import Fold, Unfold

__all__ = ["Fold", "Unfold"]
