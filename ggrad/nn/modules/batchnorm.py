"""PyTorch's `torch.nn.modules.batchnorm` path: the batch normalisation."""

from ..batch_norm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from ..lazy import LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d"]
