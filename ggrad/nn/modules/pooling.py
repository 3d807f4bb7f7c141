"""PyTorch's `torch.nn.modules.pooling` path: the pooling layers."""

from ..pooling import MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d
from ..pooling3d import MaxPool3d, AvgPool3d, AdaptiveMaxPool3d, AdaptiveAvgPool3d
from ..unpool import MaxUnpool1d, MaxUnpool2d
from ..adaptive_pool import AdaptiveAvgPool1d, AdaptiveAvgPool2d
from ..adaptive_max_pool import AdaptiveMaxPool1d, AdaptiveMaxPool2d
from ..lp_pool import LPPool1d, LPPool2d

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
           "AdaptiveMaxPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
           "AdaptiveAvgPool3d", "LPPool1d", "LPPool2d"]
