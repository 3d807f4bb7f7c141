"""Power-average pooling (PyTorch's `lp_pool1d`, `lp_pool2d`, `LPPool1d`, `LPPool2d`): (sum over the window of
x^p)^(1/p), from the average pool of x^p times the window size. As PyTorch's, no padding, and a window whose
sum is negative (an odd p over negative inputs) gives 0."""

from ..autograd.ops import relu, sign
from .module import Module
from .pooling import avg_pool1d, avg_pool2d


def _pair(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


def _root(pooled, window, norm_type):
    return (sign(pooled) * relu(pooled.abs()) * window) ** (1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002 (PyTorch's names)
    """(sum of x^norm_type over each window of `kernel_size`)^(1 / norm_type) along the last dimension."""
    pooled = avg_pool1d(input ** norm_type, kernel_size, kernel_size if stride is None else stride, 0, ceil_mode)
    return _root(pooled, kernel_size, norm_type)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """(sum of x^norm_type over each (kh, kw) window)^(1 / norm_type) over the last two dimensions."""
    kh, kw = _pair(kernel_size)
    pooled = avg_pool2d(input ** norm_type, kernel_size, kernel_size if stride is None else stride, 0, ceil_mode)
    return _root(pooled, kh * kw, norm_type)


class _LPPool(Module):
    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPool):
    """Power-average pooling over (N, C, L) or (C, L) inputs: lp_pool1d.

    Args:
        norm_type (float): p. kernel_size (int): the window. stride (int, default kernel_size). ceil_mode (bool).
    """

    def forward(self, x):
        return lp_pool1d(x, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LPPool2d(_LPPool):
    """Power-average pooling over (N, C, H, W) or (C, H, W) inputs: lp_pool2d (arguments as LPPool1d, the
    window and stride an int or a pair)."""

    def forward(self, x):
        return lp_pool2d(x, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)
