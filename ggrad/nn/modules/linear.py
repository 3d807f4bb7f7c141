"""PyTorch's `torch.nn.modules.linear` path: the linear layers."""

from ..linear import Identity, Linear

__all__ = ["Identity", "Linear"]
