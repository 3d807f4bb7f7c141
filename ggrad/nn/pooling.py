"""Max and average pooling over 1 or 2 spatial dimensions, with PyTorch's arguments: `max_pool1d`,
`max_pool2d` (dilation, ceil_mode, return_indices), `avg_pool1d`, `avg_pool2d` (ceil_mode,
count_include_pad, divisor_override) and the layers `MaxPool1d`, `MaxPool2d`, `AvgPool1d`, `AvgPool2d`.

PyTorch's defaults run as GGML's fused pool_2d (backward pool_2d_back). The other options pool one
spatial dimension at a time, last first: the windows are gathered with one index_select on host-made
positions, positions outside the input are blocked (-inf for max, weight 0 for the sum), and the
window axis is reduced. Max and sum over a rectangle are separable, and reducing the width first
keeps PyTorch's choice among ties (the first maximum in row-major order), which is where the
gradient goes.
"""

import numpy as np

from ..autograd import no_grad
from ..autograd.factory import tensor
from ..autograd.ops import avg_pool2d as _ggml_avg_pool2d, max_pool2d as _ggml_max_pool2d
from ..autograd.ops.windows import pool_outs, pool_settings
from ..ggml.errors import ArgumentError, ShapeError
from .module import Module


def _batched(x, n, op):
    if x.ndim not in (n + 1, n + 2):
        unbatched = "(C, L)" if n == 1 else "(C, H, W)"
        raise ShapeError(f"{op}: expected {n + 1}-D {unbatched} or {n + 2}-D input, got shape {tuple(x.shape)}")
    return (x.unsqueeze(0), True) if x.ndim == n + 1 else (x, False)


def _windows(x, dim, k, s, p, d, out):
    """x's windows along `dim` as (before, out, k, after), and (1, out, k, 1) host flags of the taps that
    fall inside x (the others read a clamped position and must be blocked)."""
    n = x.shape[dim]
    positions = (np.arange(out)[:, None] * s + np.arange(k)[None, :] * d - p).ravel()
    inside = ((positions >= 0) & (positions < n)).reshape(1, out, k, 1)
    picks = tensor(np.clip(positions, 0, n - 1).astype(np.int32), device=x.device)
    before = int(np.prod(x.shape[:dim], dtype=np.int64))
    after = int(np.prod(x.shape[dim + 1:], dtype=np.int64))
    return x.index_select(dim, picks).reshape(before, out, k, after), inside


def _blocked(windows, inside):
    """-inf at the taps outside the input, so they never win a max."""
    if inside.all():
        return windows
    return windows + tensor(np.where(inside, 0.0, -np.inf).astype(np.float32), device=windows.device)


def _pool_dim(x, dim, k, s, p, d, out, reduce, divisor=None):
    """Pool x along `dim` (reduce 'max' or 'sum'); `divisor` (out,) divides the sums."""
    windows, inside = _windows(x, dim, k, s, p, d, out)
    if reduce == "max":
        pooled = _blocked(windows, inside).max(dim=2)[0]
    else:
        if not inside.all():
            windows = windows * tensor(inside.astype(np.float32), device=x.device)
        pooled = windows.sum(dim=2)
    if divisor is not None:
        pooled = pooled / tensor(divisor.astype(np.float32).reshape(1, out, 1), device=x.device)
    return pooled.reshape(x.shape[:dim] + (out,) + x.shape[dim + 1:])


def _window_counts(n, k, s, p, out, count_include_pad):
    """Per output position, how many elements its window averages (PyTorch's divisor)."""
    start = np.arange(out) * s - p
    stop = np.minimum(start + k, n + p)
    if not count_include_pad:
        start, stop = np.maximum(start, 0), np.minimum(stop, n)
    return (stop - start).astype(np.float64)


def _max_indices(x, n, k, s, p, d, outs):
    """The flat spatial index of each window's first maximum, as PyTorch's return_indices (int64)."""
    with no_grad():
        size = int(np.prod(x.shape[2:]))
        flat = tensor(np.arange(size, dtype=np.float32).reshape((1, 1) + tuple(x.shape[2:])), device=x.device)
        score = x.detach()
        index = flat.expand(x.shape)
        for i in reversed(range(n)):   # the same order as the values: last dim first
            score, index = _argmax_dim(score, index, 2 + i, k[i], s[i], p[i], d[i], outs[i])
        return index.long()


def _argmax_dim(score, index, dim, k, s, p, d, out):
    """Max-pool `score` along `dim`, and carry along `index`'s entry at each maximum (the first on ties)."""
    windows, inside = _windows(score, dim, k, s, p, d, out)
    best, which = _blocked(windows, inside).max(dim=2)
    taken = _windows(index, dim, k, s, p, d, out)[0].gather(2, which.unsqueeze(2))
    shape = score.shape[:dim] + (out,) + score.shape[dim + 1:]
    return best.reshape(shape), taken.reshape(shape)


def _fused(pool, x, n, k, s, p):
    """GGML's pool_2d (a 1-D pool as a 2-D one of height 1)."""
    if n == 2:
        return pool(x, k, s, p)
    return pool(x.unsqueeze(2), (1,) + k, (1,) + s, (0,) + p).squeeze(2)


def _max_pool(x, n, op, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    k, s, p, d = pool_settings(op, n, kernel_size, stride, padding, dilation)
    x, unbatched = _batched(x, n, op)
    outs = pool_outs(op, x.shape, k, s, p, d, ceil_mode)
    source = x if x.dtype.is_float else x.float()   # integers as PyTorch pools them (exact below 2**24)
    if all(v == 1 for v in d) and not ceil_mode:
        y = _fused(_ggml_max_pool2d, source, n, k, s, p)
    else:
        y = source
        for i in reversed(range(n)):
            y = _pool_dim(y, 2 + i, k[i], s[i], p[i], d[i], outs[i], "max")
    if not x.dtype.is_float:
        y = y.to(x.dtype)
    if not return_indices:
        return y.squeeze(0) if unbatched else y
    indices = _max_indices(x, n, k, s, p, d, outs)
    return (y.squeeze(0), indices.squeeze(0)) if unbatched else (y, indices)


def _avg_pool(x, n, op, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    k, s, p, d = pool_settings(op, n, kernel_size, stride, padding, 1)
    if divisor_override is not None and (isinstance(divisor_override, bool) or divisor_override == 0):
        raise ArgumentError(f"{op}: divisor must be not zero, got divisor_override={divisor_override!r}")
    x, unbatched = _batched(x, n, op)
    outs = pool_outs(op, x.shape, k, s, p, d, ceil_mode)
    if not ceil_mode and count_include_pad and divisor_override is None:
        y = _fused(_ggml_avg_pool2d, x, n, k, s, p)
    else:
        y = x if x.dtype.is_float else x.float()
        for i in reversed(range(n)):
            counts = None if divisor_override is not None else \
                _window_counts(x.shape[2 + i], k[i], s[i], p[i], outs[i], count_include_pad)
            y = _pool_dim(y, 2 + i, k[i], s[i], p[i], 1, outs[i], "sum", counts)
        if divisor_override is not None:
            y = y / float(divisor_override)
    return y.squeeze(0) if unbatched else y


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """y[n, c, i] = max_j x[n, c, s i + d j - p] over (N, C, L) or (C, L); -inf padding never wins.
    With return_indices, also the position of each maximum in L (int64)."""
    return _max_pool(input, 1, "max_pool1d", kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """Max over each (kh, kw) window (dilated, strided, padded) of (N, C, H, W) or (C, H, W). With
    return_indices, also each maximum's flat position h * W + w (int64)."""
    return _max_pool(input, 2, "max_pool2d", kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):  # noqa: A002
    """Mean of each window of (N, C, L) or (C, L): zero padding counted unless count_include_pad=False
    (windows that ceil_mode adds past the padding count only what they cover)."""
    return _avg_pool(input, 1, "avg_pool1d", kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,  # noqa: A002
               divisor_override=None):
    """Mean of each (kh, kw) window of (N, C, H, W) or (C, H, W) as avg_pool1d's, or the window's sum
    divided by divisor_override when given."""
    return _avg_pool(input, 2, "avg_pool2d", kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


# ---- layers --------------------------------------------------------------------------------------
class _MaxPool(Module):
    n = 0
    fn = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        pool_settings(type(self).__name__, self.n, kernel_size, stride, padding, dilation)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, x):
        return type(self).fn(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                             self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPool):
    """1-D max pooling, as PyTorch's `nn.MaxPool1d` (F.max_pool1d).

    Args:
        kernel_size (int): window size.
        stride (int, optional): step between windows; defaults to kernel_size.
        padding (int, default 0): -inf padding on both sides, at most half the kernel.
        dilation (int, default 1): spacing between window taps.
        return_indices (bool, default False): also return the positions of the maxima.
        ceil_mode (bool, default False): round the output length up (a last, partial window).
    """

    n = 1
    fn = staticmethod(max_pool1d)


class MaxPool2d(_MaxPool):
    """2-D max pooling, as PyTorch's `nn.MaxPool2d` (F.max_pool2d).

    Args: as MaxPool1d's, each an int or a pair (height, width).
    Shape: (N, C, H, W) or (C, H, W) -> (N, C, H_out, W_out),
    H_out = floor_or_ceil((H + 2p - d (k - 1) - 1) / s) + 1.
    """

    n = 2
    fn = staticmethod(max_pool2d)


class AvgPool1d(Module):
    """1-D average pooling, as PyTorch's `nn.AvgPool1d` (F.avg_pool1d).

    Args:
        kernel_size (int): window size.
        stride (int, optional): defaults to kernel_size.
        padding (int, default 0): zero padding on both sides, at most half the kernel.
        ceil_mode (bool, default False): round the output length up.
        count_include_pad (bool, default True): count the zero padding in the mean.
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        k, s, p, _ = pool_settings("AvgPool1d", 1, kernel_size, stride, padding, 1)
        self.kernel_size, self.stride, self.padding = k, s, p   # tuples, as PyTorch's AvgPool1d keeps them
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, x):
        return avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    """2-D average pooling, as PyTorch's `nn.AvgPool2d` (F.avg_pool2d).

    Args: as AvgPool1d's (each an int or a pair), and divisor_override (int, optional): divide each
    window's sum by it instead of the window's size.
    """

    n = 2

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        pool_settings(type(self).__name__, self.n, kernel_size, stride, padding, 1)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, x):
        return avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                          self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
