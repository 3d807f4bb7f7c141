"""PyTorch's `torch.nn.modules.linear` path: the linear layers."""

from ..bilinear import Bilinear
from ..linear import Identity, Linear
from ..lazy import LazyLinear

__all__ = ["Bilinear", "Identity", "LazyLinear", "Linear"]
