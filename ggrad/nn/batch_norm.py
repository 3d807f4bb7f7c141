"""Batch normalisation: `batch_norm` (F.batch_norm) and the `BatchNorm1d` / `BatchNorm2d` layers.

Composed from mean/var/rsqrt, so gradients come from those primitives. In training the batch statistics
normalise and the running statistics move by `momentum` (the unbiased variance, as PyTorch); in eval the
running statistics normalise.
"""

from ..autograd import Parameter, no_grad
from ..autograd.factory import ones, tensor, zeros
from ..ggml.errors import ShapeError
from . import init
from .module import Module


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
               eps=1e-5):  # noqa: A002 (PyTorch's names)
    """y = (x - mean) / sqrt(var + eps) * weight + bias over every dimension but the channels (dim 1).

    Batch statistics when `training`, updating running_mean and running_var (when given) in place by
    `momentum`; the running statistics otherwise (they must then be given, as PyTorch requires).
    """
    if input.ndim < 2:
        raise ShapeError(f"batch_norm: expected an input of at least 2 dimensions (N, C, ...), got {input.shape}")
    dims = (0,) + tuple(range(2, input.ndim))
    shape = (1, input.shape[1]) + (1,) * (input.ndim - 2)
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError(f"batch_norm: running_{'mean' if running_mean is None else 'var'} must be defined in "
                           "evaluation mode")
    if training:
        count = input.numel() // input.shape[1]
        if training and count <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got input "
                             f"size {tuple(input.shape)}")
        mean, var = input.mean(dim=dims), input.var(dim=dims, unbiased=False)
        if training and running_mean is not None:
            with no_grad():
                running_mean.copy_(running_mean * (1 - momentum) + mean.detach() * momentum)
                running_var.copy_(running_var * (1 - momentum) + var.detach() * (momentum * count / (count - 1)))
    else:
        mean, var = running_mean, running_var
    y = (input - mean.view(shape)) * (var + eps).rsqrt().view(shape)
    if weight is not None:
        y = y * weight.view(shape)
    if bias is not None:
        y = y + bias.view(shape)
    return y


class _BatchNorm(Module):
    """Shared by BatchNorm1d/2d; `_ranks` are the input ranks the layer accepts."""
    _ranks = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(ones(num_features, dtype=dtype, device=device))
            self.bias = Parameter(zeros(num_features, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", tensor(0, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        """Running mean 0, running variance 1, no batches counted (when running statistics are tracked)."""
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, x):
        name = type(self).__name__
        if x.ndim not in self._ranks:
            raise ShapeError(f"{name}: expected a {' or '.join(f'{r}-D' for r in self._ranks)} input, got {x.shape}")
        if x.shape[1] != self.num_features:
            raise ShapeError(f"{name}({self.num_features}): input has {x.shape[1]} channels (shape {x.shape})")
        momentum = self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if momentum is None:  # a cumulative moving average
                momentum = 1.0 / self.num_batches_tracked.item()
        use_batch = self.training or not self.track_running_stats
        return batch_norm(x, self.running_mean if not self.training or self.track_running_stats else None,
                          self.running_var if not self.training or self.track_running_stats else None,
                          self.weight, self.bias, use_batch, momentum, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) inputs over N (and L), per channel C.

    Args:
        num_features (int): C.
        eps (float, default 1e-5), momentum (float or None, default 0.1; None: cumulative average),
        affine (bool, default True), track_running_stats (bool, default True), device, dtype.
    """
    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) inputs over N, H and W, per channel C (arguments as BatchNorm1d)."""
    _ranks = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of (N, C, D, H, W) inputs over N, D, H and W, per channel C (arguments as
    BatchNorm1d)."""
    _ranks = (5,)
