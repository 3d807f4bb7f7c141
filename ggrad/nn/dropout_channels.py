"""Channel-wise and self-normalising dropout, as torch.nn's: Dropout1d/2d/3d, AlphaDropout,
FeatureAlphaDropout and their functional forms.

A channel-wise ("feature") dropout draws one keep/drop decision per (sample, channel) and broadcasts it
over the spatial dims. Alpha dropout keeps the mean and variance of SELU activations: dropped units are
set to SELU's negative saturation -alpha' and the result is rescaled by a and shifted by b,

    y = a * (x * m + (-alpha') * (1 - m)) + b,  a = ((1 - p) (1 + p alpha'^2))^-1/2,  b = a alpha' p

so that y = x * (a m) + (alpha' a (m - 1) + alpha' a p), written as one multiply and one add.
The masks are drawn from ggrad's seeded generator on the host; the multiply and add are graph nodes,
so gradients flow as x * mask. The random streams differ from PyTorch's.

Five-dimensional inputs (dropout3d's batched form) need tensors of more than four dims, which ggrad does
not hold yet: dropout3d takes the unbatched (C, D, H, W) form.
"""

import math
import warnings

from ..autograd import Tensor
from ..autograd.factory import bernoulli_mask
from ..autograd.methods import _inplace
from .module import Module

_SELU_SATURATION = 1.7580993408473766   # -SELU(-inf) = selu scale * selu alpha


def _check_p(p):
    """torch's check, with torch's errors for a p that is no number (TypeError, or RuntimeError from a
    tensor's ambiguous truth value)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _check_input(input, name):  # noqa: A002
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")


def _noise_shape(shape, feature, unbatched):
    """One draw per element, or one per (sample, channel) broadcast over the rest (per channel when
    the input has no batch dim)."""
    if not feature:
        return tuple(shape)
    if len(shape) < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    lead = 1 if unbatched else 2
    return tuple(shape[:lead]) + (1,) * (len(shape) - lead)


def _dropout(x, p, training, feature, alpha, unbatched=False):
    """x * mask (+ shift for alpha dropout) with mask drawn per element or per channel."""
    if not training or p == 0.0 or x.numel() == 0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = bernoulli_mask(_noise_shape(x.shape, feature, unbatched), 1.0 - p, device=x.device)   # 1 kept, 0 dropped
    if not alpha:
        return x * (keep * (1.0 / (1.0 - p)))
    a = 1.0 / math.sqrt((_SELU_SATURATION ** 2 * p + 1.0) * (1.0 - p))
    shift = (keep - 1.0) * (_SELU_SATURATION * a) + _SELU_SATURATION * a * p
    return x * (keep * a) + shift


def _run(x, p, training, inplace, feature, alpha, name, unbatched=False):
    _check_p(p)
    _check_input(x, name)
    if inplace and training:
        return _inplace(lambda t: _dropout(t, p, training, feature, alpha, unbatched), name + "_")(x)
    return _dropout(x, p, training, feature, alpha, unbatched)


def dropout1d(input, p=0.5, training=True, inplace=False):  # noqa: A002 (PyTorch's names)
    """Zero whole channels of (N, C, L) or (C, L) with probability p; scale the rest by 1 / (1 - p)."""
    _check_p(p)
    if input.dim() not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D input. Note that dropout1d exists "
            "to provide channel-wise dropout on inputs with 1 spatial dimension, a channel dimension, and an "
            "optional batch dimension (i.e. 2D or 3D inputs).")
    return _run(input, p, training, inplace, True, False, "dropout1d", unbatched=input.dim() == 2)


def _warn_dims(name, dims, spatial):
    if dims not in (spatial + 1, spatial + 2):
        warnings.warn(
            f"{name}: Received a {dims}-D input to {name}, which is deprecated and will result in an error in a "
            f"future release. To retain the behavior and silence this warning, please use dropout instead.",
            stacklevel=3)


def dropout2d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """Zero whole channels of (N, C, H, W) with probability p; scale the rest by 1 / (1 - p).

    As PyTorch, a 3-D input is read as (N, C, L) (channel-wise 1-D dropout), with a warning."""
    _check_p(p)
    _warn_dims("dropout2d", input.dim(), 2)
    if input.dim() == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim.",
                      stacklevel=2)
    return _run(input, p, training, inplace, True, False, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) with probability p; scale the rest by 1/(1-p)."""
    _check_p(p)
    _warn_dims("dropout3d", input.dim(), 3)
    return _run(input, p, training, inplace, True, False, "dropout3d", unbatched=input.dim() == 4)


def alpha_dropout(input, p=0.5, training=False, inplace=False):  # noqa: A002
    """Alpha dropout per element (keeps SELU's zero mean and unit variance); identity unless training."""
    return _run(input, p, training, inplace, False, True, "alpha_dropout")


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):  # noqa: A002
    """Alpha dropout of whole channels (dims 0 and 1 draw, the rest share); identity unless training."""
    return _run(input, p, training, inplace, True, True, "feature_alpha_dropout")


class _DropoutNd(Module):
    """The common constructor of the dropout layers: p in [0, 1] and inplace."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        _check_p(p)
        self.p = float(p)
        self.inplace = inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """Channel-wise dropout of (N, C, L) or (C, L) inputs.

    Args:
        p (float, default 0.5): probability of a channel being zeroed.
        inplace (bool, default False): in training, the input takes the result.
    """

    def forward(self, input):  # noqa: A002
        return dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Channel-wise dropout of (N, C, H, W) inputs (a 3-D input is read as (N, C, L), as PyTorch)."""

    def forward(self, input):  # noqa: A002
        return dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Channel-wise dropout of (C, D, H, W) inputs (and (N, C, D, H, W) once ggrad holds 5-D tensors)."""

    def forward(self, input):  # noqa: A002
        return dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Alpha dropout per element, for SELU networks: y = a (x m - alpha' (1 - m)) + b in training."""

    def forward(self, input):  # noqa: A002
        return alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels, for SELU networks."""

    def forward(self, input):  # noqa: A002
        return feature_alpha_dropout(input, self.p, self.training, self.inplace)
