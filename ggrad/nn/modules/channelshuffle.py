"""PyTorch's `torch.nn.modules.channelshuffle` path: the channel shuffle."""

from ..resampling import ChannelShuffle

__all__ = ["ChannelShuffle"]
