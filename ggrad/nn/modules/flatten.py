"""PyTorch's `torch.nn.modules.flatten` path: the Flatten and Unflatten."""

from ..linear import Flatten, Unflatten

__all__ = ["Flatten", "Unflatten"]
