"""PyTorch's `torch.nn.parameter` path: `Parameter` (defined in ggrad.autograd, where Tensor is) and the lazy
modules' `UninitializedParameter`."""

from ..autograd import Parameter
from .lazy import UninitializedParameter

__all__ = ["Parameter", "UninitializedParameter"]
