"""Adaptive average pooling: `adaptive_avg_pool1d/2d` (F.) and the `AdaptiveAvgPool1d/2d` layers.

Output cell i along a dimension of size n averages input [floor(i*n/out), ceil((i+1)*n/out)), as PyTorch.
A rectangle's mean is the mean of its rows' means (each row has the same length), so 2-D pooling is 1-D
pooling along H, then along W: out_h + out_w slices and means, with gradients from those primitives.
"""

from ..autograd.ops import cat
from ..ggml.errors import ShapeError
from .module import Module


def _pool_dim(x, dim, out):
    n = x.shape[dim]
    cells = []
    for i in range(out):
        start, end = (i * n) // out, -((-(i + 1) * n) // out)
        cells.append(x.narrow(dim, start, end - start).mean(dim=dim, keepdim=True))
    return cells[0] if out == 1 else cat(cells, dim)


def _sizes(output_size, spatial, op):
    sizes = (output_size,) * len(spatial) if isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != len(spatial):
        raise ValueError(f"{op}: output_size must have {len(spatial)} entries, got {output_size!r}")
    sizes = tuple(n if s is None else s for s, n in zip(sizes, spatial))
    if any(not isinstance(s, int) or s <= 0 for s in sizes):
        raise ValueError(f"{op}: output_size entries must be positive ints (or None), got {output_size!r}")
    return sizes


def _adaptive_avg_pool(input, output_size, nd, op):  # noqa: A002
    if input.ndim not in (nd + 1, nd + 2):
        raise ShapeError(f"{op}: expected a {nd + 1}-D or {nd + 2}-D input, got shape {input.shape}")
    spatial = tuple(input.shape[input.ndim - nd:])
    if 0 in spatial:
        raise ShapeError(f"{op}: the pooled dimensions must be non-empty, got shape {input.shape}")
    for k, out in enumerate(_sizes(output_size, spatial, op)):
        input = _pool_dim(input, input.ndim - nd + k, out)
    return input


def adaptive_avg_pool1d(input, output_size):  # noqa: A002 (PyTorch's names)
    """Average over adaptive windows of the last dimension of (N, C, L) or (C, L)."""
    return _adaptive_avg_pool(input, output_size, 1, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(input, output_size):  # noqa: A002
    """Average over adaptive windows of the last two dimensions of (N, C, H, W) or (C, H, W)."""
    return _adaptive_avg_pool(input, output_size, 2, "adaptive_avg_pool2d")


class AdaptiveAvgPool1d(Module):
    """Adaptive average pooling to `output_size` along L (see adaptive_avg_pool1d)."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return adaptive_avg_pool1d(x, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool2d(AdaptiveAvgPool1d):
    """Adaptive average pooling to `output_size` (an int, or (H, W) with None keeping that size)."""

    def forward(self, x):
        return adaptive_avg_pool2d(x, self.output_size)
