"""PyTorch's `torch.nn.modules.instancenorm` path: the instance normalisation."""

from ..group_norm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from ..lazy import LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
           "LazyInstanceNorm3d"]
