"""PyTorch's `torch.nn.modules.normalization` path: the normalisation layers."""

from ..group_norm import LocalResponseNorm, GroupNorm
from ..normalization import LayerNorm, RMSNorm

__all__ = ["LocalResponseNorm", "LayerNorm", "GroupNorm", "RMSNorm"]
