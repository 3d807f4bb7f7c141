"""PyTorch's `torch.nn.modules.upsampling` path: the upsampling layers."""

from ..resampling import Upsample, UpsamplingNearest2d, UpsamplingBilinear2d

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]
