"""PyTorch's `torch.nn.modules.module` path: the the Module base class."""

from ..module import Module

__all__ = ["Module"]
