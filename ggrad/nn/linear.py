"""Affine and shape layers: `Identity`, `Linear`, `Flatten`."""

import math

from ..autograd.factory import empty
from ..ggml.errors import ShapeError
from . import functional as F
from . import init
from .module import Module
from ..autograd import Parameter


class Identity(Module):
    """Returns its input unchanged (a placeholder).

    y = x

    Args:
        *args, **kwargs: accepted and ignored (as in PyTorch).
    """

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Linear(Module):
    """Applies an affine transformation to the last dimension of the input.

    y = x W^T + b, with W of shape (out_features, in_features)

    Args:
        in_features (int): size of each input sample.
        out_features (int): size of each output sample.
        bias (bool, default True): learn an additive bias b.
        device (optional): where the parameters live (default CPU).
        dtype (optional): floating dtype of the parameters (default float32).

    Shape: (..., in_features) -> (..., out_features).
    Init: W and b ~ U(-1/sqrt(in_features), 1/sqrt(in_features)), as PyTorch.
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        _check_positive(type(self).__name__, in_features=in_features, out_features=out_features)
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty(out_features, in_features, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        if x.ndim == 0 or x.shape[-1] != self.in_features:
            raise ShapeError(f"Linear(in_features={self.in_features}, out_features={self.out_features}): expected "
                             f"input with last dimension {self.in_features}, got shape {tuple(x.shape)}")
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Flatten(Module):
    """Flattens a contiguous range of dimensions into one.

    y = x.flatten(start_dim, end_dim)

    Args:
        start_dim (int, default 1): first dimension to flatten (the batch dimension 0 is kept by default).
        end_dim (int, default -1): last dimension to flatten.
    """

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dimension `dim` into `unflattened_size` (Flatten's inverse).

    Args:
        dim (int): the dimension split.
        unflattened_size (tuple of int): its new sizes (one may be -1).
    """

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, x):
        return x.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


def _check_positive(layer, **sizes):
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{layer}: {name} must be a positive integer, got {value!r}")
