"""Rearranging and resizing layers of PyTorch: Upsample (and UpsamplingNearest2d / UpsamplingBilinear2d),
PixelShuffle, PixelUnshuffle, ChannelShuffle, with their functional forms.

The shuffles are one reshape, one permute and one reshape each (views, so gradients flow back);
Upsample is `F.interpolate` with fixed arguments.
"""

from __future__ import annotations

from ..autograd.arguments import ArgumentTypeError, TENSOR, as_int, kinds, require
from ..autograd.tensor import Tensor
from ..autograd.ops import interpolate
from ..ggml.errors import ShapeError
from .module import Module

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle",
           "ChannelShuffle", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "upsample"]


def _no_tensor(value, name, op):
    if isinstance(value, Tensor):
        raise ArgumentTypeError(f"{op}(): argument '{name}' must be int, not Tensor")
    return value


def _rank_3(op, input):
    if input.ndim < 3:
        raise ShapeError(f"{op} expects input to have at least 3 dimensions, but got input with {input.ndim} "
                         "dimension(s)")


def pixel_shuffle(input, upscale_factor):  # noqa: A002 (PyTorch's names)
    """(*, C r^2, H, W) -> (*, C, H r, W r): each group of r^2 channels becomes an r x r block of pixels."""
    require("pixel_shuffle", "input", input, TENSOR)
    r = as_int(_no_tensor(upscale_factor, "upscale_factor", "pixel_shuffle"), "upscale_factor", "pixel_shuffle")
    _rank_3("pixel_shuffle", input)
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise ShapeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                         f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    x = input.reshape(-1, c // (r * r), r, r, h, w).permute(0, 1, 4, 2, 5, 3)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):  # noqa: A002
    """(*, C, H r, W r) -> (*, C r^2, H, W): the inverse of pixel_shuffle."""
    require("pixel_unshuffle", "input", input, TENSOR)
    r = as_int(_no_tensor(downscale_factor, "downscale_factor", "pixel_unshuffle"), "downscale_factor",
               "pixel_unshuffle")
    _rank_3("pixel_unshuffle", input)
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise ShapeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but input "
                         f"has shape {tuple(input.shape)} and downscale_factor={r}")
    x = input.reshape(-1, c, h // r, r, w // r, r).permute(0, 1, 3, 5, 2, 4)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def channel_shuffle(input, groups):  # noqa: A002
    """(N, C, *) with C = g k: the channels taken as a (g, k) grid and read out transposed (ShuffleNet)."""
    n, c = input.shape[0], input.shape[1]
    if groups <= 0 or c % groups:
        raise ShapeError(f"channel_shuffle: number of channels {c} must be divisible by groups {groups}")
    rest = tuple(input.shape[2:])
    return input.reshape(n, groups, c // groups, -1).transpose(1, 2).reshape(n, c, *rest)


@kinds(size=None)
def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):  # noqa: A002
    """PyTorch's deprecated F.upsample: F.interpolate."""
    return interpolate(input, size, scale_factor, mode, align_corners)


class Upsample(Module):
    """Resize the spatial dims: `interpolate(x, size, scale_factor, mode, align_corners)`.

    Args:
        size (int or tuple, optional): the output's spatial size.
        scale_factor (float or tuple, optional): the spatial sizes' multiplier.
        mode (str): "nearest", "linear", "bilinear", "bicubic", "trilinear" (as F.interpolate). Default: "nearest".
        align_corners (bool, optional): for the linear modes. Default: None.
        recompute_scale_factor (bool, optional): as F.interpolate. Default: None.
    """

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.mode, self.align_corners = size, mode, align_corners
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) else scale_factor
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):  # noqa: A002
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        what = f"scale_factor={self.scale_factor}" if self.scale_factor is not None else f"size={self.size}"
        return f"{what}, mode='{self.mode}'"


class UpsamplingNearest2d(Upsample):
    """Upsample with mode "nearest" (4-D input)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Upsample with mode "bilinear" and align_corners=True (4-D input)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    """`pixel_shuffle(x, upscale_factor)`."""

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):  # noqa: A002
        return pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """`pixel_unshuffle(x, downscale_factor)`."""

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):  # noqa: A002
        return pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """`channel_shuffle(x, groups)`."""

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):  # noqa: A002
        return channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"
