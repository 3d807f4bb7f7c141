"""PyTorch's `torch.nn.modules.conv` path: the convolutions."""

from ..conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d

__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]
