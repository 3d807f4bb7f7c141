"""F.interpolate: nearest, nearest-exact, linear, bilinear, trilinear, bicubic and area resizing, computed as
PyTorch computes it.

Each spatial dimension is resampled in turn. Nearest and linear use host-made index lists (GGML get_rows
through index_select; its backward get_rows_back adds every copy's gradient): nearest picks one source per
output, linear blends two, x[i0] (1 - t) + x[i1] t, with PyTorch's source positions (align_corners or
half-pixel centres, clamped at 0). Bicubic (four taps, PyTorch's A = -0.75, borders clamped) and area
(PyTorch's adaptive average pooling windows) multiply the dimension by a host-made (out, in) weight matrix.
"""

import math

import numpy as np

from ...ggml.errors import ShapeError, UnsupportedShapeError
from ..factory import tensor
from ..sizes import check as check_size
from .indexing import index_select
from .products import matmul
from .views import transpose
from ..declaration import declare
from ..arguments import kinds

_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "bicubic", "area")
_CUBIC_A = -0.75


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


def _cubic_matrix(n_in, n_out, factor, align_corners):
    """(n_out, n_in) weights of PyTorch's bicubic resampling (no clamp of the source position at 0)."""
    scale = np.float32(_scale(n_in, n_out, factor, align_corners))
    dst = np.arange(n_out, dtype=np.float32)
    src = dst * scale if align_corners else (dst + np.float32(0.5)) * scale - np.float32(0.5)
    base = np.floor(src)
    t = (src - base).astype(np.float64)
    a = _CUBIC_A
    near = lambda x: ((a + 2) * x - (a + 3)) * x * x + 1            # |x| <= 1
    far = lambda x: ((a * x - 5 * a) * x + 8 * a) * x - 4 * a      # 1 < |x| < 2
    weights = [far(t + 1), near(t), near(1 - t), far(2 - t)]
    matrix = np.zeros((n_out, n_in), np.float64)
    for k, w in enumerate(weights):
        np.add.at(matrix, (np.arange(n_out), np.clip(base.astype(np.int64) - 1 + k, 0, n_in - 1)), w)
    return matrix


def _area_matrix(n_in, n_out):
    """(n_out, n_in) weights of PyTorch's adaptive average pooling: the mean of [floor(i n/m), ceil((i+1) n/m))."""
    matrix = np.zeros((n_out, n_in), np.float64)
    for i in range(n_out):
        start, end = (i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix


def _apply_matrix(x, d, matrix):
    """x with dimension d replaced by matrix @ (that dimension): one matmul of x moved to have d last."""
    w = tensor(matrix.T.astype(np.float32), device=x.device).to(x.dtype)
    return transpose(matmul(transpose(x, d, -1), w), d, -1)


@kinds(size=None)
@declare()
def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,  # noqa: A002
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dimensions (all after batch and channels) of a 3-D, 4-D or 5-D input."""
    if mode not in _MODES:
        raise ValueError(f"interpolate: mode {mode!r} is not supported (one of {', '.join(_MODES)})")
    if input.ndim not in (3, 4, 5):
        raise UnsupportedShapeError(f"interpolate: only 3-D (N, C, L), 4-D (N, C, H, W) and 5-D (N, C, D, H, W) "
                                    f"inputs are supported, got {input.shape}")
    spatial = input.ndim - 2
    needs = _LINEAR.get(mode, 2 if mode == "bicubic" else spatial)
    if needs != spatial:
        raise ValueError(f"interpolate: mode {mode!r} needs a {needs + 2}-D input, got {input.shape}")
    if align_corners is not None and mode not in _LINEAR and mode != "bicubic":
        raise ValueError("interpolate: align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if antialias:
        raise ValueError("interpolate: antialias=True is not supported")
    sizes, factors = _sizes(input, spatial, size, scale_factor)
    check_size("interpolate", input.shape[:2] + sizes, input.dtype)   # before host index lists of that size
    if recompute_scale_factor:
        factors = (None,) * spatial
    out = input
    for k, (n_out, factor) in enumerate(zip(sizes, factors)):
        d = 2 + k
        n_in = input.shape[d]
        if n_out <= 0:
            raise ValueError(f"interpolate: output size {sizes} must be positive (input {input.shape})")
        if mode == "bicubic":
            out = _apply_matrix(out, d, _cubic_matrix(n_in, n_out, factor, bool(align_corners)))
        elif mode == "area":
            out = _apply_matrix(out, d, _area_matrix(n_in, n_out)) if n_out != n_in else out
        elif mode in _LINEAR:
            i0, i1, t = _linear_weights(n_in, n_out, factor, bool(align_corners))
            shape = [1] * input.ndim
            shape[d] = n_out
            weight = tensor(t.reshape(shape), device=input.device)
            out = index_select(out, d, i0) * (1.0 - weight) + index_select(out, d, i1) * weight
        elif n_out != n_in or factor not in (None, 1.0):
            out = index_select(out, d, _nearest_index(n_in, n_out, factor, mode == "nearest-exact"))
    return out if out is not input else input * 1
