"""F.interpolate: nearest, nearest-exact, linear and bilinear resizing, computed as PyTorch computes it.

Each spatial dimension is resampled in turn by host-made index lists (GGML get_rows through
index_select; its backward get_rows_back adds every copy's gradient): nearest picks one source per
output, linear blends two, x[i0] (1 - t) + x[i1] t, with PyTorch's source positions (align_corners
or half-pixel centres, clamped at 0).
"""

import math

import numpy as np

from ...ggml.errors import ShapeError, UnsupportedShapeError
from ..factory import tensor
from .indexing import index_select

_LINEAR = {"linear": 1, "bilinear": 2}
_MODES = ("nearest", "nearest-exact", "linear", "bilinear")


def _sizes(x, spatial, size, scale_factor):
    """(output sizes, scales passed to the source-index rule or None) per spatial dimension."""
    shape = x.shape[2:]
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: exactly one of size and scale_factor must be given")
    if size is not None:
        sizes = (size,) * spatial if isinstance(size, int) else tuple(size)
        if len(sizes) != spatial:
            raise ValueError(f"interpolate: size {size} must have {spatial} entries for input {x.shape}")
        return tuple(int(s) for s in sizes), (None,) * spatial
    factors = (scale_factor,) * spatial if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
    if len(factors) != spatial:
        raise ValueError(f"interpolate: scale_factor {scale_factor} must have {spatial} entries for input {x.shape}")
    return tuple(int(math.floor(n * f)) for n, f in zip(shape, factors)), tuple(float(f) for f in factors)


def _scale(n_in, n_out, factor, align_corners):
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / factor if factor is not None else n_in / n_out


def _nearest_index(n_in, n_out, factor, exact):
    scale = np.float32(_scale(n_in, n_out, factor, False))
    dst = np.arange(n_out, dtype=np.float32)
    src = np.floor((dst + np.float32(0.5)) * scale) if exact else np.floor(dst * scale)
    return np.minimum(src.astype(np.int64), n_in - 1)


def _linear_weights(n_in, n_out, factor, align_corners):
    scale = np.float32(_scale(n_in, n_out, factor, align_corners))
    dst = np.arange(n_out, dtype=np.float32)
    src = dst * scale if align_corners else np.maximum((dst + np.float32(0.5)) * scale - np.float32(0.5), 0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    return i0, i1, (src - i0).astype(np.float32)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,  # noqa: A002
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dimensions (all after batch and channels) of a 3-D or 4-D input."""
    if mode not in _MODES:
        raise ValueError(f"interpolate: mode {mode!r} is not supported (one of {', '.join(_MODES)})")
    if input.ndim not in (3, 4):   # PyTorch also takes 5-D (trilinear); ggrad has no 3-D resampling yet
        raise UnsupportedShapeError(f"interpolate: only 3-D (N, C, L) and 4-D (N, C, H, W) inputs are supported, "
                                    f"got {input.shape}")
    spatial = input.ndim - 2
    if mode in _LINEAR and _LINEAR[mode] != spatial:
        raise ValueError(f"interpolate: mode {mode!r} needs a {_LINEAR[mode] + 2}-D input, got {input.shape}")
    if align_corners is not None and mode not in _LINEAR:
        raise ValueError("interpolate: align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear")
    if antialias:
        raise ValueError("interpolate: antialias=True is not supported")
    sizes, factors = _sizes(input, spatial, size, scale_factor)
    if recompute_scale_factor:
        factors = (None,) * spatial
    out = input
    for k, (n_out, factor) in enumerate(zip(sizes, factors)):
        d = 2 + k
        n_in = input.shape[d]
        if n_out <= 0:
            raise ValueError(f"interpolate: output size {sizes} must be positive (input {input.shape})")
        if mode in _LINEAR:
            i0, i1, t = _linear_weights(n_in, n_out, factor, bool(align_corners))
            shape = [1] * input.ndim
            shape[d] = n_out
            weight = tensor(t.reshape(shape), device=input.device)
            out = index_select(out, d, i0) * (1.0 - weight) + index_select(out, d, i1) * weight
        elif n_out != n_in or factor not in (None, 1.0):
            out = index_select(out, d, _nearest_index(n_in, n_out, factor, mode == "nearest-exact"))
    return out if out is not input else input * 1
