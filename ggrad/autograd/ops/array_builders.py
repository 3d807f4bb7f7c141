"""PyTorch's functions that arrange tensors or build index and window tensors, composed of ggrad's ops:
atleast_1d/2d/3d, column_stack, dstack, hsplit/vsplit/dsplit, cartesian_prod, block_diag, diag_embed,
tril_indices/triu_indices and the signal windows (hann, hamming, blackman, bartlett, kaiser; computed on the
host in float64, as constants)."""

import math

import numpy as np

from ..factory import tensor
from ..tensor import Tensor, _axis
from ..torch_dtypes import INT64
from . import joins, shape_ops
from .torch_composites import meshgrid, movedim, tensor_split
from ..declaration import declare
from ..arguments import SHAPE, TENSOR, kinds

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "column_stack", "dstack", "hsplit", "vsplit", "dsplit",
           "cartesian_prod", "block_diag", "diag_embed", "tril_indices", "triu_indices", "hann_window",
           "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]


def _each(tensors, fn):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(fn(t) for t in tensors[0])
    return fn(tensors[0]) if len(tensors) == 1 else tuple(fn(t) for t in tensors)


@declare()
def atleast_1d(*tensors):
    """Each tensor with at least one dimension (a 0-d one becomes shape (1,))."""
    return _each(tensors, lambda t: t.reshape(1) if t.ndim == 0 else t)


@declare()
def atleast_2d(*tensors):
    """Each tensor with at least two dimensions: (n,) becomes (1, n)."""
    return _each(tensors, lambda t: t.reshape(1, 1) if t.ndim == 0 else t.unsqueeze(0) if t.ndim == 1 else t)


@declare()
def atleast_3d(*tensors):
    """Each tensor with at least three dimensions: (n,) becomes (1, n, 1), (m, n) becomes (m, n, 1)."""
    def lift(t):
        if t.ndim == 0:
            return t.reshape(1, 1, 1)
        if t.ndim == 1:
            return t.reshape(1, t.shape[0], 1)
        return t.unsqueeze(-1) if t.ndim == 2 else t
    return _each(tensors, lift)


def _sequence(name, tensors):
    if not isinstance(tensors, (list, tuple)) or not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError(f"{name}(): argument 'tensors' (position 1) must be tuple of Tensors, not "
                        f"{type(tensors).__name__}")
    return tensors


@declare()
def column_stack(tensors):
    """The tensors side by side as columns: 0-d and 1-d ones become (n, 1) columns, then joined on dim 1."""
    tensors = _sequence("column_stack", tensors)
    columns = [t.reshape(-1, 1) if t.ndim <= 1 else t for t in tensors]
    return joins.cat(columns, 1)


@declare()
def dstack(tensors):
    """The tensors (made at least 3-d) joined along the third dimension."""
    tensors = _sequence("dstack", tensors)
    return joins.cat([atleast_3d(t) for t in tensors], 2)


def _split_along(name, input, sections, dim, least):  # noqa: A002
    if input.ndim < least:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {least} dimension, but got a tensor with "
                           f"{input.ndim} dimensions!")
    if isinstance(sections, int) and input.shape[dim] % sections:
        raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the dimension "
                           f"{input.shape[dim]} is not divisible by the split_size {sections}!")
    return tensor_split(input, sections, dim)


@kinds(indices_or_sections=SHAPE)
@declare(method=True)
def hsplit(input, indices_or_sections):  # noqa: A002
    """Split along the columns: dim 1 (dim 0 for a 1-d tensor); an int must divide that size."""
    return _split_along("hsplit", input, indices_or_sections, 1 if input.ndim > 1 else 0, 1)


@kinds(indices_or_sections=SHAPE)
@declare(method=True)
def vsplit(input, indices_or_sections):  # noqa: A002
    """Split along dim 0 of a tensor of at least two dimensions."""
    return _split_along("vsplit", input, indices_or_sections, 0, 2)


@kinds(indices_or_sections=SHAPE)
@declare(method=True)
def dsplit(input, indices_or_sections):  # noqa: A002
    """Split along dim 2 of a tensor of at least three dimensions."""
    return _split_along("dsplit", input, indices_or_sections, 2, 3)


@kinds(tensors=TENSOR)
@declare()
def cartesian_prod(*tensors):
    """Every combination of one element of each 1-d tensor, as rows (a single tensor is returned as it is)."""
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"cartesian_prod(): argument 'tensors' must be tuple of Tensors, not {type(t).__name__}")
        if t.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return joins.stack([g.reshape(-1) for g in grids], 1)


@kinds(tensors=TENSOR)
@declare()
def block_diag(*tensors):
    """The tensors (0-d and 1-d ones as one row) on the diagonal of a zero matrix."""
    blocks = [t.reshape(1, -1) if t.ndim < 2 else t for t in tensors]
    for b in blocks:
        if b.ndim != 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input "
                               f"{blocks.index(b)} has {b.ndim} dimensions")
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        rows.append(shape_ops.pad(b, (left, width - left - b.shape[1])))
        left += b.shape[1]
    return joins.cat(rows, 0)


@declare(method=True)
def diag_embed(input, offset=0, dim1=-2, dim2=-1):  # noqa: A002
    """Tensors whose (dim1, dim2) planes hold input's last dimension on their `offset` diagonal, zeros elsewhere."""
    n = input.shape[-1]
    m = n + abs(offset)
    w = shape_ops.pad(input, (0, offset) if offset >= 0 else (-offset, 0)) if offset else input
    mask = tensor(np.eye(m, k=offset, dtype=np.float32), device=input.device).to(input.dtype)
    out = w.unsqueeze(-1) * mask   # (..., m, m): row r, column r + offset
    d1, d2 = _axis(dim1, out.ndim), _axis(dim2, out.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return movedim(out, (out.ndim - 2, out.ndim - 1), (d1, d2)) if (d1, d2) != (out.ndim - 2, out.ndim - 1) \
        else out


def _indices(rows, cols, offset, dtype, device, lower):
    pairs = (np.tril_indices if lower else np.triu_indices)(rows, offset, cols)
    return tensor(np.stack(pairs).astype(np.int64), dtype=INT64 if dtype is None else dtype, device=device)


@declare()
def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (2, N) row and column indices of the lower triangle of a row x col matrix (diagonal `offset`)."""
    return _indices(row, col, offset, dtype, device, True)


@declare()
def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (2, N) indices of the upper triangle."""
    return _indices(row, col, offset, dtype, device, False)


def _window(name, values_of, window_length, periodic, dtype, device, requires_grad):
    if not isinstance(window_length, int) or window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    if window_length <= 1:
        values = np.ones(window_length)
    else:
        n = window_length + 1 if periodic else window_length
        values = values_of(np.arange(n, dtype=np.float64), n)[:window_length]
    return tensor(values.astype(np.float32), dtype=dtype, device=device, requires_grad=requires_grad)


@declare()
def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    """0.5 - 0.5 cos(2 pi k / (N - 1)) (N = window_length + 1 when periodic, the last point dropped)."""
    return _window("hann_window", lambda k, n: 0.5 - 0.5 * np.cos(2 * math.pi * k / (n - 1)), window_length,
                   periodic, dtype, device, requires_grad)


@declare()
def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   requires_grad=False):
    """alpha - beta cos(2 pi k / (N - 1))."""
    return _window("hamming_window", lambda k, n: alpha - beta * np.cos(2 * math.pi * k / (n - 1)), window_length,
                   periodic, dtype, device, requires_grad)


@declare()
def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    """0.42 - 0.5 cos(2 pi k / (N - 1)) + 0.08 cos(4 pi k / (N - 1))."""
    return _window("blackman_window", lambda k, n: 0.42 - 0.5 * np.cos(2 * math.pi * k / (n - 1))
                   + 0.08 * np.cos(4 * math.pi * k / (n - 1)), window_length, periodic, dtype, device, requires_grad)


@declare()
def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    """1 - |2k / (N - 1) - 1|."""
    return _window("bartlett_window", lambda k, n: 1 - np.abs(2 * k / (n - 1) - 1), window_length, periodic, dtype,
                   device, requires_grad)


@declare()
def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  requires_grad=False):
    """I0(beta sqrt(1 - (2k / (N - 1) - 1)^2)) / I0(beta)."""
    return _window("kaiser_window", lambda k, n: np.i0(beta * np.sqrt(np.clip(1 - (2 * k / (n - 1) - 1) ** 2, 0, None)))
                   / np.i0(beta), window_length, periodic, dtype, device, requires_grad)

