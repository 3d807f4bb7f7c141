"""Pooling over three spatial dimensions, as torch's: `max_pool3d` (dilation, ceil_mode, return_indices),
`avg_pool3d` (ceil_mode, count_include_pad, divisor_override), `adaptive_avg_pool3d`,
`adaptive_max_pool3d` and the layers MaxPool3d, AvgPool3d, AdaptiveAvgPool3d, AdaptiveMaxPool3d.

GGML tensors have four dims, so the pools run on a folded (B, D, H, W) layout, B = N * C: one spatial
dim at a time, last first, with pooling.py's gathered windows (max and sum over a box are separable;
reducing W, then H, then D keeps torch's first maximum in (d, h, w) order, which is where the gradient
goes). The inputs are (C, D, H, W), already folded, or (N, C, D, H, W), folded by a reshape here; ggrad
holds five-dim tensors only once the general >4-dim folding lands, so today the 4-D form is the one
that reaches these ops.
"""

import math
import numpy as np

from ..autograd import no_grad
from ..autograd.factory import tensor
from ..autograd.ops import cat
from ..autograd.ops.windows import pool_outs, pool_settings
from ..ggml.errors import ArgumentError, ShapeError
from .adaptive_pool import AdaptiveAvgPool1d, _sizes
from .pooling import _MaxPool, AvgPool2d, _argmax_dim, _pool_dim, _window_counts

_SPATIAL = 3


def _fold(x, op):
    """x as (B, D, H, W) and the leading dims to restore: (C,) or (N, C)."""
    if x.ndim not in (4, 5):
        raise ShapeError(f"{op}: expected 4-D (C, D, H, W) or 5-D (N, C, D, H, W) input, got shape {tuple(x.shape)}")
    lead, spatial = tuple(x.shape[:-3]), tuple(x.shape[-3:])
    folded = x if x.ndim == 4 else x.reshape((int(np.prod(lead)),) + spatial)
    return (folded if folded.dtype.is_float else folded.float()), lead


def _unfold(y, lead):
    return y if len(lead) == 1 else y.reshape(lead + tuple(y.shape[1:]))


def _flat_positions(x):
    """Each element's flat spatial index d * H * W + h * W + w, in x's (B, D, H, W) shape."""
    spatial = tuple(x.shape[1:])
    flat = tensor(np.arange(int(np.prod(spatial)), dtype=np.float32).reshape((1,) + spatial), device=x.device)
    return flat.expand(x.shape)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """Max over each (kd, kh, kw) window of (N, C, D, H, W) or (C, D, H, W); -inf padding never wins.
    With return_indices, also each maximum's flat position d * H * W + h * W + w (int64)."""
    op = "max_pool3d"
    k, s, p, d = pool_settings(op, _SPATIAL, kernel_size, stride, padding, dilation)
    x, lead = _fold(input, op)
    outs = pool_outs(op, x.shape, k, s, p, d, ceil_mode)
    y = x
    for i in reversed(range(_SPATIAL)):
        y = _pool_dim(y, 1 + i, k[i], s[i], p[i], d[i], outs[i], "max")
    if not return_indices:
        return _unfold(y, lead)
    with no_grad():
        score, index = x.detach(), _flat_positions(x)
        for i in reversed(range(_SPATIAL)):
            score, index = _argmax_dim(score, index, 1 + i, k[i], s[i], p[i], d[i], outs[i])
    return _unfold(y, lead), _unfold(index.long(), lead)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,  # noqa: A002
               divisor_override=None):
    """Mean of each (kd, kh, kw) window of (N, C, D, H, W) or (C, D, H, W): zero padding counted unless
    count_include_pad=False, or the window's sum divided by divisor_override when given."""
    op = "avg_pool3d"
    k, s, p, d = pool_settings(op, _SPATIAL, kernel_size, stride, padding, 1)
    if divisor_override is not None and (isinstance(divisor_override, bool) or divisor_override == 0):
        raise ArgumentError(f"{op}: divisor must be not zero, got divisor_override={divisor_override!r}")
    x, lead = _fold(input, op)
    outs = pool_outs(op, x.shape, k, s, p, d, ceil_mode)
    y = x
    for i in reversed(range(_SPATIAL)):
        counts = None if divisor_override is not None else \
            _window_counts(x.shape[1 + i], k[i], s[i], p[i], outs[i], count_include_pad)
        y = _pool_dim(y, 1 + i, k[i], s[i], p[i], 1, outs[i], "sum", counts)
    if divisor_override is not None:
        y = y / float(divisor_override)
    return _unfold(y, lead)


def _cells(n, out):
    """torch's adaptive cells along a dim of size n: [floor(i n / out), ceil((i + 1) n / out))."""
    return [((i * n) // out, -((-(i + 1) * n) // out)) for i in range(out)]


def _adaptive(input, output_size, op):  # noqa: A002
    x, lead = _fold(input, op)
    spatial = tuple(x.shape[1:])
    if 0 in spatial:
        raise ShapeError(f"{op}: the pooled dimensions must be non-empty, got shape {tuple(input.shape)}")
    sizes = _sizes(output_size, spatial, op)
    check_result_fits(op, input, sizes)
    return x, lead, sizes


def check_result_fits(op, input, sizes):  # noqa: A002
    """An adaptive pool's windows are one op per output cell: a result of `sizes` over input's leading dims
    that its device could not hold is refused (ShapeError, a RuntimeError, as PyTorch's allocator refuses it)
    before they are made, not after hours of recording."""
    shape = tuple(input.shape[:input.ndim - len(sizes)]) + tuple(sizes)
    needed = math.prod(shape) * input.dtype.itemsize
    if needed > input.device.total_memory:
        raise ShapeError(f"{op}: the result {shape} needs {needed:.0f} bytes, more than {input.device.name} "
                         f"has ({input.device.total_memory})")


def adaptive_avg_pool3d(input, output_size):  # noqa: A002 (PyTorch's names)
    """Average over torch's adaptive windows of the last three dims of (N, C, D, H, W) or (C, D, H, W)."""
    x, lead, sizes = _adaptive(input, output_size, "adaptive_avg_pool3d")
    for i in reversed(range(_SPATIAL)):
        dim = 1 + i
        parts = [x.narrow(dim, a, b - a).mean(dim=dim, keepdim=True) for a, b in _cells(x.shape[dim], sizes[i])]
        x = parts[0] if len(parts) == 1 else cat(parts, dim)
    return _unfold(x, lead)


def adaptive_max_pool3d(input, output_size, return_indices=False):  # noqa: A002
    """Max over torch's adaptive windows of the last three dims; with return_indices, also each maximum's
    flat position d * H * W + h * W + w (int64)."""
    x, lead, sizes = _adaptive(input, output_size, "adaptive_max_pool3d")
    index = _flat_positions(x) if return_indices else None
    for i in reversed(range(_SPATIAL)):
        dim = 1 + i
        values, picks = [], []
        for a, b in _cells(x.shape[dim], sizes[i]):
            best, which = x.narrow(dim, a, b - a).max(dim=dim, keepdim=True)
            values.append(best)
            if index is not None:
                picks.append(index.narrow(dim, a, b - a).gather(dim, which))
        x = values[0] if len(values) == 1 else cat(values, dim)
        if index is not None:
            index = picks[0] if len(picks) == 1 else cat(picks, dim)
    if index is None:
        return _unfold(x, lead)
    return _unfold(x, lead), _unfold(index.detach().long(), lead)


# ---- layers --------------------------------------------------------------------------------------
class MaxPool3d(_MaxPool):
    """3-D max pooling, as torch's `nn.MaxPool3d` (F.max_pool3d).

    Args: kernel_size, stride (defaults to kernel_size), padding (0), dilation (1), return_indices (False),
    ceil_mode (False); each an int or a triple (depth, height, width).
    """

    n = 3
    fn = staticmethod(max_pool3d)


class AvgPool3d(AvgPool2d):
    """3-D average pooling, as torch's `nn.AvgPool3d` (F.avg_pool3d).

    Args: kernel_size, stride (defaults to kernel_size), padding (0), ceil_mode (False),
    count_include_pad (True), divisor_override (None); each size an int or a triple.
    """

    n = _SPATIAL

    def forward(self, x):
        return avg_pool3d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                          self.divisor_override)


class AdaptiveAvgPool3d(AdaptiveAvgPool1d):
    """Adaptive average pooling to `output_size` (an int, or (D, H, W) with None keeping that size)."""

    def forward(self, x):
        return adaptive_avg_pool3d(x, self.output_size)


class AdaptiveMaxPool3d(AdaptiveAvgPool3d):
    """Adaptive max pooling to `output_size`; return_indices (default False) also returns the maxima's positions."""

    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, x):
        return adaptive_max_pool3d(x, self.output_size, self.return_indices)
