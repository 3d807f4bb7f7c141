"""PyTorch's `torch.nn.modules.pixelshuffle` path: the pixel shuffles."""

from ..resampling import PixelShuffle, PixelUnshuffle

__all__ = ["PixelShuffle", "PixelUnshuffle"]
