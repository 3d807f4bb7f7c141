"""Sliding windows: `Tensor.unfold(dimension, size, step)`, and im2col / col2im as PyTorch's F.unfold and F.fold.

A window view is one index_select (windows' positions computed on the host) and a reshape, so its gradient is
the index_add that sums overlapping windows back; F.fold is that index_add itself.
"""

import numpy as np

from ...ggml.errors import ShapeError
from ..arguments import ArgumentTypeError, TENSOR, as_int, kinds, require
from ..factory import tensor, zeros
from ..tensor import Tensor, _axis
from .indexing import index_select
from .scatter_ops import index_add
from .shape_ops import pad
from ..declaration import declare


@declare(function=False, method=True)
def unfold(input, dimension, size, step):  # noqa: A002 (PyTorch's names)
    """Every window of `size` elements along `dimension`, `step` apart: that dim becomes the number of windows
    and a last dim of `size` is added (PyTorch's Tensor.unfold)."""
    require("unfold", "input", input, TENSOR)
    d = _axis(as_int(dimension, "dimension", "unfold"), max(input.ndim, 1))
    size, step = as_int(size, "size", "unfold"), as_int(step, "step", "unfold")
    length = input.shape[d] if input.ndim else 1
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    count = (length - size) // step + 1
    positions = (np.arange(count)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
    picked = index_select(input if input.ndim else input.reshape(1), d, tensor(positions, device=input.device))
    shape = list(picked.shape)
    shape[d:d + 1] = [count, size]
    return picked.reshape(shape).movedim(d + 1, -1)


def _pair(value, name, op):
    value = (value, value) if isinstance(value, int) else tuple(value)
    if len(value) != 2:
        raise ValueError(f"{op}(): {name} must be an int or a pair of ints, got {value}")
    return value


def _patch_index(channels, height, width, kernel, dilation, padding, stride):
    """For each (channel, kernel row, kernel column) and output position, the flat index into the padded
    (channels, height + 2 pad, width + 2 pad) image: the im2col layout, with the output size."""
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = kernel, dilation, padding, stride
    hp, wp = height + 2 * ph, width + 2 * pw
    oh, ow = (hp - dh * (kh - 1) - 1) // sh + 1, (wp - dw * (kw - 1) - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"the kernel {kernel} (dilation {dilation}) is larger than the padded input "
                           f"({hp}, {wp})")
    c, i, j = np.meshgrid(np.arange(channels), np.arange(kh), np.arange(kw), indexing="ij")
    rows = i.reshape(-1, 1) * dh + (np.arange(oh) * sh).repeat(ow)[None, :]
    cols = j.reshape(-1, 1) * dw + np.tile(np.arange(ow) * sw, oh)[None, :]
    return (c.reshape(-1, 1) * hp * wp + rows * wp + cols), (oh, ow), (hp, wp)


def _check_kernel(kernel_size):
    """PyTorch's parse of unfold's kernel_size, before the input's rank: ints (TypeError else; an empty Tensor
    is its RuntimeError), all positive (RuntimeError)."""
    if isinstance(kernel_size, Tensor) and kernel_size.numel() == 0:
        raise RuntimeError("unfold(): kernel_size is an empty Tensor")
    sizes = (kernel_size,) if not isinstance(kernel_size, (tuple, list)) else tuple(kernel_size)
    if not all(isinstance(k, int) and not isinstance(k, bool) for k in sizes):
        raise ArgumentTypeError(f"unfold(): argument 'kernel_size' must be tuple of ints, not "
                                f"{type(kernel_size).__name__}")
    if any(k <= 0 for k in sizes):
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_size: {kernel_size}")


@kinds("unfold", kernel_size=None)
def im2col(input, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002
    """(N, C, H, W) -> (N, C kh kw, L): every sliding kernel_size patch as a column (PyTorch's F.unfold)."""
    require("unfold", "input", input, TENSOR)
    _check_kernel(kernel_size)
    if input.ndim < 3:   # PyTorch reads the channel dim (-3) first
        raise IndexError(f"Dimension out of range (expected to be in range of [{-input.ndim}, {input.ndim - 1}], "
                         f"but got -3)")
    if input.ndim > 4:
        raise ShapeError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)")
    x = input if input.ndim == 4 else input.unsqueeze(0)
    n, c, h, w = x.shape
    kernel, dilation = _pair(kernel_size, "kernel_size", "unfold"), _pair(dilation, "dilation", "unfold")
    padding, stride = _pair(padding, "padding", "unfold"), _pair(stride, "stride", "unfold")
    index, (oh, ow), _ = _patch_index(c, h, w, kernel, dilation, padding, stride)
    padded = pad(x, (padding[1], padding[1], padding[0], padding[0])) if any(padding) else x
    flat = padded.reshape(n, -1)
    cols = index_select(flat, 1, tensor(index.reshape(-1), device=x.device)).reshape(n, index.shape[0], oh * ow)
    return cols if input.ndim == 4 else cols.squeeze(0)


def col2im(input, output_size, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002
    """(N, C kh kw, L) -> (N, C, H, W): the columns summed back into the image where their patches overlap
    (PyTorch's F.fold, the adjoint of unfold)."""
    require("fold", "input", input, TENSOR)
    if input.ndim not in (2, 3):
        raise ShapeError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported "
                         f"(got {input.ndim}D)")
    cols = input if input.ndim == 3 else input.unsqueeze(0)
    h, w = _pair(output_size, "output_size", "fold")
    kernel, dilation = _pair(kernel_size, "kernel_size", "fold"), _pair(dilation, "dilation", "fold")
    padding, stride = _pair(padding, "padding", "fold"), _pair(stride, "stride", "fold")
    per_channel = kernel[0] * kernel[1]
    if cols.shape[1] % per_channel:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, "
                           f"but got input.size(1)={cols.shape[1]} and kernel_size={kernel}")
    c = cols.shape[1] // per_channel
    index, (oh, ow), (hp, wp) = _patch_index(c, h, w, kernel, dilation, padding, stride)
    if cols.shape[2] != oh * ow:
        raise RuntimeError(f"Given output_size={(h, w)}, kernel_size={kernel}, dilation={dilation}, "
                           f"padding={padding}, stride={stride}, expected size of input's dimension 2 to match the "
                           f"calculated number of sliding blocks {oh} * {ow} = {oh * ow}, but got "
                           f"input.size(2)={cols.shape[2]}.")
    n = cols.shape[0]
    image = index_add(zeros(n, c * hp * wp, dtype=cols.dtype, device=cols.device), 1,
                      tensor(index.reshape(-1), device=cols.device), cols.reshape(n, -1))
    image = image.reshape(n, c, hp, wp)[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + w]
    return image if input.ndim == 3 else image.squeeze(0)


__all__ = ["unfold", "im2col", "col2im"]
