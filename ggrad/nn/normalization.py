"""Normalisation and regularisation layers: `LayerNorm`, `RMSNorm`, `Dropout`."""

from ..autograd.factory import empty
from ..ggml.errors import ShapeError
from . import functional as F
from . import init
from .module import Module
from ..autograd import Parameter


def _shape_tuple(normalized_shape, layer):
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not shape or any(isinstance(s, bool) or not isinstance(s, int) or s <= 0 for s in shape):
        raise ValueError(f"{layer}: normalized_shape must be positive integers, got {normalized_shape!r}")
    return shape


def _check_trailing(x, shape, layer):
    if tuple(x.shape[x.ndim - len(shape):]) != shape or x.ndim < len(shape):
        raise ShapeError(f"{layer}({shape}): expected input whose last dimensions are {shape}, "
                         f"got shape {tuple(x.shape)}")


class LayerNorm(Module):
    """Layer normalisation over the trailing `normalized_shape` dimensions.

    y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias   (biased variance)

    Args:
        normalized_shape (int or tuple of int): the trailing dimensions normalised.
        eps (float, default 1e-5): added to the variance.
        elementwise_affine (bool, default True): learn weight (init 1) and bias (init 0).
        bias (bool, default True): learn the bias (when elementwise_affine).
        device, dtype (optional): where the parameters live and their dtype.
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape, "LayerNorm")
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(empty(self.normalized_shape, dtype=dtype, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, x):
        _check_trailing(x, self.normalized_shape, "LayerNorm")
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class RMSNorm(Module):
    """Root-mean-square normalisation over the trailing `normalized_shape` dimensions.

    y = x / sqrt(mean(x^2) + eps) * weight

    Args:
        normalized_shape (int or tuple of int): the trailing dimensions normalised.
        eps (float, optional): added to the mean square; None uses float32's machine epsilon (PyTorch's default).
        elementwise_affine (bool, default True): learn weight (init 1).
        device, dtype (optional): where the parameters live and their dtype.
    """

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape, "RMSNorm")
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, x):
        _check_trailing(x, self.normalized_shape, "RMSNorm")
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class Dropout(Module):
    """Zeroes each element with probability p during training and scales the rest by 1/(1-p).

    y = x * m / (1 - p), m ~ Bernoulli(1 - p) (training); y = x (eval)

    Args:
        p (float, default 0.5): probability of an element being zeroed.
        inplace (bool, default False): in training, the input takes the result.
    """

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p!r}")
        self.p = float(p)
        self.inplace = inplace

    def forward(self, x):
        return F.dropout(x, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
