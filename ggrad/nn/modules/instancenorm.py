"""PyTorch's `torch.nn.modules.instancenorm` path: the instance normalisation."""

from ..group_norm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]
