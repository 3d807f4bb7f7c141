"""`ggrad.fft` (PyTorch's torch.fft): discrete Fourier transforms as products with cosine and sine matrices.

GGML has no FFT. Each 1-D transform multiplies the real and imaginary parts (complex_tensor.py's pairs) by the
(n_in, n_out) matrices cos(2 pi j k / n) and sin(2 pi j k / n), made on the host in float64 and kept as float32
constants: O(n^2) work a transform instead of the FFT's O(n log n), in the step's graph, differentiable as the
linear maps they are (PyTorch's gradients). Meant for the sizes model code transforms (spectral layers, losses
over a few hundred bins); float32 products give ~1e-6 relative error for n in the hundreds. Multi-dimensional
transforms apply the 1-D one dim by dim. `norm` is "backward" (default), "ortho" or "forward", as PyTorch's.
"""

import functools
import math

import numpy as np

from .autograd.complex_tensor import ComplexTensor, complex as _complex
from .autograd.factory import tensor, zeros
from .autograd.ops import cat, roll
from .autograd.tensor import Tensor

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "fftn", "ifftn", "rfft2", "irfft2", "rfftn", "irfftn",
           "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = ("backward", "ortho", "forward")


@functools.lru_cache(maxsize=64)
def _cos_sin(n_in, n_out, n):
    """(cos, sin) of 2 pi j k / n for j < n_in, k < n_out, as float64 host arrays (j k reduced mod n first)."""
    angles = 2.0 * np.pi * (np.outer(np.arange(n_in), np.arange(n_out)) % n) / n
    return np.cos(angles), np.sin(angles)


def _constants(n_in, n_out, n, device, weights=None):
    c, s = _cos_sin(n_in, n_out, n)
    if weights is not None:
        c, s = c * weights[:, None], s * weights[:, None]
    return tensor(c.astype(np.float32), device=device), tensor(s.astype(np.float32), device=device)


def _scale(n, norm, inverse):
    if norm is None:
        norm = "backward"
    if norm not in _NORMS:
        raise RuntimeError(f'Invalid normalization mode: "{norm}"')
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    return 1.0 / n if (norm == "forward") != inverse else 1.0


def _parts(x, op):
    if isinstance(x, ComplexTensor):
        return x.real, x.imag
    if not isinstance(x, Tensor):
        raise TypeError(f"fft_{op}(): argument 'input' must be Tensor, not {type(x).__name__}")
    return (x if x.dtype.is_float else x.float()), None


def _fit(t, dim, n):
    """t's dim trimmed or zero-padded to n (the signal length a transform reads)."""
    size = t.shape[dim]
    if n == size:
        return t
    if n < size:
        return t.narrow(dim, 0, n)
    pad_shape = list(t.shape)
    pad_shape[dim] = n - size
    return cat([t, zeros(tuple(pad_shape), dtype=t.dtype, device=t.device)], dim)


def _along(t, dim, matrix):
    """t's dim multiplied by matrix (n_in, n_out)."""
    if t is None:
        return None
    moved = t.movedim(dim, -1)
    return (moved @ matrix).movedim(-1, dim)


def _dim(dim, ndim, op):
    if not -ndim <= dim < max(ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {dim})")
    return dim % ndim


def _transform(x, n, dim, norm, inverse, op, onesided=False):
    """The complex DFT of x along dim (onesided: only bins 0 .. n // 2, for a real x)."""
    a, b = _parts(x, op)
    dim = _dim(dim, a.ndim, op)
    n = a.shape[dim] if n is None else n
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    a, b = _fit(a, dim, n), None if b is None else _fit(b, dim, n)
    c, s = _constants(n, n // 2 + 1 if onesided else n, n, a.device)
    sign = 1.0 if inverse else -1.0   # e^(sign i 2 pi j k / n)
    ac, as_ = _along(a, dim, c), _along(a, dim, s)
    if b is None:
        re, im = ac, as_ * sign
    else:
        re, im = ac - _along(b, dim, s) * sign, _along(b, dim, c) + as_ * sign
    scale = _scale(n, norm, inverse)
    return _complex(re * scale, im * scale) if scale != 1.0 else _complex(re, im)


def fft(input, n=None, dim=-1, norm=None):  # noqa: A002 (PyTorch's names)
    """The 1-D discrete Fourier transform of `input` (real or complex) along `dim`, of `n` points."""
    return _transform(input, n, dim, norm, False, "fft")


def ifft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The inverse of fft."""
    return _transform(input, n, dim, norm, True, "ifft")


def rfft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The DFT of a real signal: the n // 2 + 1 non-negative frequency bins."""
    if isinstance(input, ComplexTensor):
        raise RuntimeError("rfft expects a real input tensor, but got ComplexFloat")
    return _transform(input, n, dim, norm, False, "rfft", onesided=True)


def irfft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The real signal of n points (default 2 (m - 1)) whose rfft is `input` (m bins; Hermitian symmetry)."""
    a, b = _parts(input, "irfft")
    dim = _dim(dim, a.ndim, "irfft")
    n = 2 * (a.shape[dim] - 1) if n is None else n
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    bins = n // 2 + 1
    a, b = _fit(a, dim, bins), None if b is None else _fit(b, dim, bins)
    weights = np.full(bins, 2.0)   # each inner bin stands for itself and its mirror image
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0
    c, s = _constants(bins, n, n, a.device, weights)
    out = _along(a, dim, c)
    if b is not None:
        out = out - _along(b, dim, s)
    scale = _scale(n, norm, True)
    return out * scale if scale != 1.0 else out


def _dims(x, s, dim, default_all):
    ndim = (x.real if isinstance(x, ComplexTensor) else x).ndim
    if dim is None:
        dim = tuple(range(ndim - len(s), ndim)) if s is not None else tuple(range(ndim)) if default_all else (-2, -1)
    dim = (dim,) if isinstance(dim, int) else tuple(dim)
    sizes = (None,) * len(dim) if s is None else tuple(s)
    if len(sizes) != len(dim):
        raise RuntimeError("When given, dim and shape arguments must have the same length")
    return dim, sizes


def fftn(input, s=None, dim=None, norm=None):  # noqa: A002
    """The N-D DFT over `dim` (default: every dim, or the last len(s))."""
    for d, n in zip(*_dims(input, s, dim, True)):
        input = fft(input, n, d, norm)
    return input


def ifftn(input, s=None, dim=None, norm=None):  # noqa: A002
    for d, n in zip(*_dims(input, s, dim, True)):
        input = ifft(input, n, d, norm)
    return input


def fft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return fftn(input, s, dim, norm)


def ifft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return ifftn(input, s, dim, norm)


def rfftn(input, s=None, dim=None, norm=None):  # noqa: A002
    """rfft over the last of `dim`, then fft over the others."""
    dims, sizes = _dims(input, s, dim, True)
    out = rfft(input, sizes[-1], dims[-1], norm)
    for d, n in zip(dims[:-1], sizes[:-1]):
        out = fft(out, n, d, norm)
    return out


def irfftn(input, s=None, dim=None, norm=None):  # noqa: A002
    """ifft over all but the last of `dim`, then irfft over the last."""
    dims, sizes = _dims(input, s, dim, True)
    for d, n in zip(dims[:-1], sizes[:-1]):
        input = ifft(input, n, d, norm)
    return irfft(input, sizes[-1], dims[-1], norm)


def rfft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return rfftn(input, s, dim, norm)


def irfft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return irfftn(input, s, dim, norm)


def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """The sample frequencies of an n-point fft: 0, 1, ..., -(n // 2), ..., -1 over d n."""
    k = np.concatenate([np.arange((n - 1) // 2 + 1), np.arange(-(n // 2), 0)]) / (d * n)
    return tensor(k.astype(np.float32), dtype=dtype, device=device, requires_grad=requires_grad)


def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """The sample frequencies of an n-point rfft: 0 .. n // 2 over d n."""
    k = np.arange(n // 2 + 1) / (d * n)
    return tensor(k.astype(np.float32), dtype=dtype, device=device, requires_grad=requires_grad)


def _shift(input, dim, sign):  # noqa: A002
    pairs = input._pairs if isinstance(input, ComplexTensor) else input
    ndim = pairs.ndim - (1 if isinstance(input, ComplexTensor) else 0)
    dims = tuple(range(ndim)) if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
    dims = tuple(d % ndim for d in dims)
    shifts = tuple(sign * (pairs.shape[d] // 2) for d in dims)
    out = roll(pairs, shifts, dims)
    return ComplexTensor(out) if isinstance(input, ComplexTensor) else out


def fftshift(input, dim=None):  # noqa: A002
    """The zero frequency moved to the centre (a roll by n // 2 over `dim`, default every dim)."""
    return _shift(input, dim, 1)


def ifftshift(input, dim=None):  # noqa: A002
    """The inverse of fftshift."""
    return _shift(input, dim, -1)

