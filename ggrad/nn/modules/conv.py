"""PyTorch's `torch.nn.modules.conv` path: the convolutions."""

from ..conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from ..conv3d import Conv3d
from ..conv_transpose3d import ConvTranspose3d
from ..lazy import (LazyConv1d, LazyConv2d, LazyConv3d,
                    LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d)

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "LazyConv1d",
           "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d"]
