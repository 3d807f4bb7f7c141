"""`ConvTranspose3d`: the transposed 3-D convolution layer over `F.conv_transpose3d`
(ggrad/autograd/ops/conv_transpose3d.py)."""

from ..autograd.ops.conv_transpose3d import conv_transpose3d
from .conv import _ConvTransposeNd

__all__ = ["ConvTranspose3d"]


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-D convolution over (N, C_in, D, H, W); each spatial dim as ConvTranspose1d's.

    Weight (C_in, C_out / groups, kD, kH, kW); init as PyTorch (fan_in = C_out / groups * kD * kH * kW).
    """

    n = 3
    conv = staticmethod(conv_transpose3d)
