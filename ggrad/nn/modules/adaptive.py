"""PyTorch's `torch.nn.modules.adaptive` path: the adaptive softmax."""

from ..adaptive_softmax import AdaptiveLogSoftmaxWithLoss

__all__ = ["AdaptiveLogSoftmaxWithLoss"]
