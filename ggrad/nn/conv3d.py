"""`Conv3d`: the 3-D convolution layer over `F.conv3d` (ggrad/autograd/ops/conv3d.py)."""

from ..autograd.ops.conv3d import conv3d
from .conv import _ConvNd

__all__ = ["Conv3d"]


class Conv3d(_ConvNd):
    """3-D convolution (cross-correlation) over an input of shape (N, C_in, D, H, W).

    y[n, o, d, i, j] = bias[o] + sum_{c, t, u, v} weight[o, c, t, u, v] * x[n, c, s0 d + d0 t - p0, ...]

    Args: in_channels, out_channels, kernel_size, stride (1), padding (0, 'valid' or 'same'), dilation (1),
    groups (1), bias (True), padding_mode ('zeros', 'reflect', 'replicate' or 'circular'), as Conv2d's.
    """

    n = 3
    conv = staticmethod(conv3d)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, device,
                         dtype, padding_mode)
