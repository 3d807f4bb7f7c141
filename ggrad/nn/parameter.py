"""PyTorch's `torch.nn.parameter` path: `Parameter` (defined in ggrad.autograd, where Tensor is)."""

from ..autograd import Parameter

__all__ = ["Parameter"]
