"""Per-sample normalisation over channel groups: `group_norm`, `instance_norm`, `local_response_norm` (the
F forms) and the layers `GroupNorm`, `InstanceNorm1d`, `InstanceNorm2d`, `InstanceNorm3d`, `LocalResponseNorm`.

A group norm is a layer norm of each (sample, group) row: the input is viewed as (N, G, C/G * spatial)
and normalised by the fused row norm (one GGML node forward, its composed backward), then the
per-channel affine is applied. An instance norm is a group norm with one channel per group.
"""

from ..autograd import Parameter, no_grad
from ..autograd.factory import ones, zeros
from ..autograd.ops import layer_norm, pad
from ..ggml.errors import ShapeError
from . import init
from .batch_norm import _BatchNorm, batch_norm
from .module import Module
from ..autograd.arguments import kinds


def _per_channel(t, ndim):
    return t.reshape((1, t.shape[0]) + (1,) * (ndim - 2))


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):  # noqa: A002 (PyTorch's names)
    """y = (x - mean_g) / sqrt(var_g + eps) * weight_c + bias_c, the statistics of each sample's group g of
    C / num_groups channels (every spatial position included; biased variance).

    Args:
        input (Tensor): (N, C, *).
        num_groups (int): G, dividing C.
        weight, bias (Tensor, optional): (C,).
        eps (float, default 1e-5).
    """
    if input.ndim < 2:
        raise ShapeError(f"group_norm: expected an input of at least 2 dimensions (N, C, *), got {input.shape}")
    n, c = input.shape[0], input.shape[1]
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups <= 0 or c % num_groups:
        raise ShapeError(f"group_norm: Expected number of channels in input to be divisible by num_groups, but got "
                         f"input of shape {list(input.shape)} and num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise ShapeError(f"group_norm: expected {name} of shape ({c},), got {tuple(t.shape)}")
    rows = input.reshape(n, num_groups, input.numel() // max(n * num_groups, 1))
    y = layer_norm(rows, (rows.shape[-1],), None, None, eps).reshape(input.shape)
    if weight is not None:
        y = y * _per_channel(weight, input.ndim)
    if bias is not None:
        y = y + _per_channel(bias, input.ndim)
    return y


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):  # noqa: A002
    """Each (sample, channel) normalised over its spatial positions; with `use_input_stats=False` the
    running statistics normalise instead. When given and use_input_stats, running_mean and running_var
    move by `momentum` towards the batch average of the per-instance mean and unbiased variance."""
    if input.ndim < 3:
        raise ShapeError(f"instance_norm: expected an input of at least 3 dimensions (N, C, *), got {input.shape}")
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if running_mean is not None or running_var is not None:
        dims = tuple(range(2, input.ndim))
        count = input.numel() // (input.shape[0] * input.shape[1])
        with no_grad():
            x = input.detach()
            if running_mean is not None:
                running_mean.copy_(running_mean * (1 - momentum) + x.mean(dim=dims).mean(0) * momentum)
            if running_var is not None:
                var = x.var(dim=dims, unbiased=False).mean(0) * (count / max(count - 1, 1))
                running_var.copy_(running_var * (1 - momentum) + var * momentum)
    return group_norm(input, input.shape[1], weight, bias, eps)


@kinds(alpha=None, size=None)
def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):  # noqa: A002
    """y_c = x_c / (k + alpha / size * sum_{c' near c} x_c'^2) ** beta, the window of `size` channels around
    c (size // 2 before, (size - 1) // 2 after; zeros past the edges)."""
    if input.ndim < 3:
        raise ShapeError(f"local_response_norm: Expected 3D or higher dimensionality input (got {input.ndim} "
                         "dimensions)")
    c = input.shape[1]
    square = input * input
    amounts = [0, 0] * (input.ndim - 2) + [size // 2, (size - 1) // 2]
    padded = pad(square, amounts)
    window = padded.narrow(1, 0, c)
    for shift in range(1, size):
        window = window + padded.narrow(1, shift, c)
    return input / (window * (alpha / size) + k) ** beta


class GroupNorm(Module):
    """Group normalisation, as PyTorch's `nn.GroupNorm`: F.group_norm with learned per-channel affine.

    Args:
        num_groups (int): groups the channels are split into.
        num_channels (int): C, divisible by num_groups.
        eps (float, default 1e-5): added to the variance.
        affine (bool, default True): learn weight (init 1) and bias (init 0), shape (C,).
        device, dtype (optional): where the parameters live and their dtype.
        bias (bool, keyword-only, default True): learn the bias (when affine).

    Shape: (N, C, *) -> the same.
    """

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        if affine:
            self.weight = Parameter(ones(num_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
        if affine and bias:
            self.bias = Parameter(zeros(num_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, x):
        return group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class _InstanceNorm(_BatchNorm):
    """InstanceNorm1d/2d: BatchNorm's parameters and buffers with PyTorch's instance-norm defaults."""

    _dims = 0   # the spatial dimensions

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False,
                 device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        if not bias:
            self.register_parameter("bias", None)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")

    def forward(self, x):
        name = type(self).__name__
        if x.ndim not in (self._dims + 1, self._dims + 2):
            raise ShapeError(f"{name}: expected {self._dims + 1}D (unbatched) or {self._dims + 2}D (batched) input, "
                             f"got shape {tuple(x.shape)}")
        unbatched = x.ndim == self._dims + 1
        if unbatched:
            x = x.unsqueeze(0)
        if self.affine and x.shape[1] != self.num_features:
            raise ShapeError(f"{name}({self.num_features}): expected input's size at dim=1 to match num_features "
                             f"({self.num_features}), but got: {x.shape[1]} (shape {tuple(x.shape)})")
        use_input_stats = self.training or not self.track_running_stats
        y = instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_input_stats,
                          0.0 if self.momentum is None else self.momentum, self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of (N, C, L) or (C, L) inputs: each sample's channel over L, as PyTorch's.

    Args:
        num_features (int): C.
        eps (float, default 1e-5), momentum (float, default 0.1), affine (bool, default False),
        track_running_stats (bool, default False: eval mode also uses the instance's statistics),
        device, dtype, bias (bool, keyword-only, default True: learn the bias when affine).
    """

    _dims = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of (N, C, H, W) or (C, H, W) inputs over H and W (arguments as InstanceNorm1d)."""

    _dims = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of (N, C, D, H, W) or (C, D, H, W) inputs over D, H and W (arguments as
    InstanceNorm1d)."""

    _dims = 3


class LocalResponseNorm(Module):
    """Local response normalisation across channels, as PyTorch's `nn.LocalResponseNorm` (F.local_response_norm).

    Args:
        size (int): channels in the window.
        alpha (float, default 1e-4), beta (float, default 0.75), k (float, default 1.0).
    """

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, x):
        return local_response_norm(x, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
