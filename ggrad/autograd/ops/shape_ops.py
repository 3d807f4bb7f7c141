"""Rearranging ops: flip, roll, repeat, repeat_interleave, tril/triu, F.pad and one_hot.

flip and the reflect/replicate/circular pads pick entries by host-made index lists (GGML get_rows, whose
backward get_rows_back adds the gradient of every copy); roll is GGML's roll; repeat tiles (GGML repeat,
backward repeat_back); tril/triu are GGML's diag_mask_zero, shifted by a slice and a pad for negative
diagonals, so infinities outside the triangle become 0 as in PyTorch (a 0/1 mask would make nan).

one_hot returns int64, as PyTorch.
"""

import numpy as np

from ...ggml import f32, ops
from ...ggml.errors import ShapeError, UnsupportedDTypeError, UnsupportedShapeError
from ..torch_dtypes import BOOL, INT64
from ..factory import arange, tensor, zeros
from .. import device_locks
from ..grad_mode import no_grad
from ..memory import graph_of
from ..primitive import Primitive
from ..arguments import DIMS, NUMBER, as_int, kinds
from ..tensor import Tensor, _axis
from .broadcast import Expand
from . import unary as un
from .indexing import count_outside, index_select, known_values
from . import folding
from .views import narrow, reshape
from .view_primitives import PadTo, Slice
from ..declaration import declare


def _dims(dims, ndim, op):
    if isinstance(dims, Tensor):
        raise TypeError(f"{op}(): argument 'dims' must be tuple of ints, not Tensor")
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    out = [_axis(d, ndim) for d in dims]
    if len(set(out)) != len(out):
        raise RuntimeError(f"{op}: dims {dims} has a repeated dimension")
    return out


@kinds(dims=DIMS)
@declare()
def flip(x, dims):
    """x with the order of entries reversed along each of `dims`."""
    for d in _dims(dims, x.ndim, "flip"):
        if x.shape[d] > 1:
            x = index_select(x, d, arange(x.shape[d] - 1, -1, -1, device=x.device))
    return x


@declare(method=True)
def fliplr(x):
    if x.ndim < 2:
        raise RuntimeError(f"fliplr: Input must be >= 2-d, got shape {x.shape}")
    return flip(x, 1)


@declare(method=True)
def flipud(x):
    if x.ndim < 1:
        raise RuntimeError("flipud: Input must be >= 1-d, got a 0-d tensor")
    return flip(x, 0)


class Roll(Primitive):
    """x rotated by `shifts` (numpy order, each in (-n, n)) along its dimensions; backward rolls back."""
    dtypes = None

    @staticmethod
    def build(ctx, graph, x, shifts):
        ctx.shifts = shifts
        padded = [0] * (4 - len(shifts)) + list(shifts)
        return ops.roll(graph.ctx, x, *reversed(padded))

    @staticmethod
    def backward(ctx, g):
        return Roll.apply(g, tuple(-s for s in ctx.shifts)), None


@kinds(dims=DIMS)
@declare(method=True)
def roll(x, shifts, dims=None):
    """Entries shifted by `shifts` along `dims`, wrapping around (the flattened tensor when dims is None)."""
    if dims is None:
        return reshape(roll(reshape(x, x.numel()), shifts, 0), x.shape)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"roll: shifts ({len(shifts)}) and dims ({len(dims)}) must have the same length")
    per_dim = [0] * x.ndim
    for s, d in zip(shifts, dims):
        d = _axis(d, x.ndim)
        if x.shape[d]:
            per_dim[d] = (per_dim[d] + int(s)) % x.shape[d]
    if not any(per_dim) or x.numel() == 0:
        return x * 1
    src = x if x.dtype is f32 else x.to(f32)
    if x.ndim > 4:   # one dimension at a time, folded around it
        out = src
        for d, shift in enumerate(per_dim):
            if shift:
                out = folding.along(out, d, lambda y, k, shift=shift: Roll.apply(y, (0, shift, 0)))
    else:
        out = Roll.apply(src, tuple(per_dim))
    return out if out.dtype is x.dtype else out.to(x.dtype)


@declare(method=True)
def repeat(x, *sizes):
    """x tiled `sizes[i]` times along dimension i (leading new dimensions for extra sizes)."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) < x.ndim:
        raise RuntimeError(f"repeat: number of repeat dims {len(sizes)} can not be smaller than the number of "
                           f"tensor dims {x.ndim} (shape {x.shape})")
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"repeat: repeats {sizes} must be non-negative")
    src = (1,) * (len(sizes) - x.ndim) + x.shape
    shape = tuple(n * s for n, s in zip(src, sizes))
    base = reshape(x, src)
    if 0 in shape:
        return zeros(shape, dtype=x.dtype, device=x.device)
    if len(shape) > 4 and shape != src:
        return folding.tile(base, src, sizes)
    return base * 1 if shape == src else Expand.apply(base, shape)


@declare()
def repeat_interleave(x, repeats=None, dim=None, *, output_size=None):
    """Each entry repeated `repeats` times along `dim` (the flattened tensor when dim is None). Without
    repeats, x is a 1-D integer tensor of counts and the result repeats each index, as PyTorch.
    `output_size` (PyTorch's hint that saves a host read) is checked when given."""
    if repeats is None:
        if dim is not None:
            raise TypeError("repeat_interleave(): the one-argument form (a tensor of counts) takes no dim")
        return _repeat_indices(x)
    out = _repeat_interleave(x, repeats, dim)
    if output_size is not None and out.shape[dim if dim is not None else 0] != output_size:
        raise RuntimeError(f"repeat_interleave: output_size {output_size} does not match the repeats' total "
                           f"{out.shape[dim if dim is not None else 0]}")
    return out


def _repeat_indices(counts):
    """repeat_interleave(counts): index i repeated counts[i] times (int64)."""
    if counts.dtype.is_float or counts.dtype is BOOL:
        raise UnsupportedDTypeError(f"repeat_interleave: the repeats must be an integer tensor, got "
                                    f"{counts.dtype.name}")
    if counts.ndim != 1:
        raise ShapeError(f"repeat_interleave only accepts a 1-D vector of repeats, got shape {counts.shape}")
    return _repeat_interleave(arange(counts.shape[0], device=counts.device), counts, 0)


def _repeat_interleave(x, repeats, dim):
    if dim is None:
        x, dim = reshape(x, x.numel()), 0
    d = _axis(dim, x.ndim)
    n = x.shape[d]
    if isinstance(repeats, int) or (isinstance(repeats, Tensor) and repeats.ndim == 0):
        r = int(repeats)
        if r < 0:
            raise RuntimeError(f"repeat_interleave: repeats must be non-negative, got {r}")
        if x.ndim >= 4:
            index = np.repeat(np.arange(n), r)
            return index_select(x, d, index)
        spread = Expand.apply(reshape(x, x.shape[:d + 1] + (1,) + x.shape[d + 1:]),
                              x.shape[:d + 1] + (r,) + x.shape[d + 1:]) if r else None
        if spread is None:
            return narrow(x, d, 0, 0) * 1
        return reshape(spread, x.shape[:d] + (n * r,) + x.shape[d + 1:])
    counts = known_values(repeats) if isinstance(repeats, Tensor) else np.asarray(repeats)
    if counts is None:
        counts = repeats.numpy()
    counts = np.asarray(counts).astype(np.int64).reshape(-1)
    if counts.size != n and counts.size != 1:
        raise RuntimeError(f"repeat_interleave: repeats must have the same size as input along dim {d} "
                           f"({n}), got {counts.size}")
    if (counts < 0).any():
        raise RuntimeError("repeat_interleave: repeats can not be negative")
    return index_select(x, d, np.repeat(np.arange(n), counts if counts.size == n else int(counts[0])))


# ---- triangles -----------------------------------------------------------------------------------
class TrilMask(Primitive):
    """Zeros above diagonal k >= 0 of the last two dimensions (GGML diag_mask_zero); self-adjoint."""

    @staticmethod
    def build(ctx, graph, x, k):
        ctx.k = k
        return ops.diag_mask_zero(graph.ctx, x, k)

    @staticmethod
    def backward(ctx, g):
        return TrilMask.apply(g, ctx.k), None


def _matrix_check(x, op):
    if x.ndim < 2:
        raise RuntimeError(f"{op}: input tensor must have at least 2 dimensions, got shape {x.shape}")


@declare(method=True, inplace=True)
def tril(x, diagonal=0):
    """Entries on and below the `diagonal`-th diagonal of the last two dims; zeros elsewhere."""
    _matrix_check(x, "tril")
    rows, cols = x.shape[-2:]
    k = as_int(diagonal, "diagonal", "tril")
    if k >= cols - 1:
        return x * 1
    src = x if x.dtype is f32 else x.to(f32)
    if k <= -rows:   # nothing kept: zeros that still pass (zero) gradients
        out = PadTo.apply(narrow(src, -2, rows, 0), (0,) * (x.ndim - 2) + (rows, 0), x.shape)
    elif k >= 0:
        out = TrilMask.apply(src, k)
    else:   # rows from -k on keep a triangle shifted down: cut them out, mask, pad zeros back on top
        starts = (0,) * (x.ndim - 2) + (-k, 0)
        lower = TrilMask.apply(Slice.apply(src, starts, x.shape), 0)
        out = PadTo.apply(lower, starts, x.shape)
    return out if out.dtype is x.dtype else out.to(x.dtype)


@declare(method=True, inplace=True)
def triu(x, diagonal=0):
    """Entries on and above the `diagonal`-th diagonal of the last two dims; zeros elsewhere."""
    _matrix_check(x, "triu")
    return tril(x.transpose(-1, -2), -as_int(diagonal, "diagonal", "triu")).transpose(-1, -2)


# ---- padding -------------------------------------------------------------------------------------
def _pad_index(n, before, after, mode):
    """Host indices into a dimension of size n that give its padded version."""
    positions = np.arange(-before, n + after)
    if mode == "reflect":
        period = 2 * (n - 1)
        p = np.mod(positions, period) if period else np.zeros_like(positions)
        return np.where(p >= n, period - p, p)
    if mode == "replicate":
        return np.clip(positions, 0, n - 1)
    return np.mod(positions, n)   # circular


@kinds(value=NUMBER)
@declare()
def pad(x, pad, mode="constant", value=None):
    """F.pad: `pad` lists (before, after) pairs from the last dimension backwards.

    Modes: "constant" (filled with `value`, default 0), "reflect", "replicate" and "circular".
    Negative amounts crop.
    """
    if isinstance(pad, Tensor):
        raise TypeError("pad(): argument 'pad' (position 2) must be tuple of ints, not Tensor")
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ValueError(f"pad: padding length {len(pad)} must be even and at most 2 * ndim ({2 * x.ndim}) "
                         f"for input of shape {x.shape}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"pad: mode {mode!r} is not one of constant, reflect, replicate, circular")
    if mode != "constant" and value:
        raise ValueError(f"pad: padding mode {mode!r} doesn't take in value argument")
    if mode != "constant":   # PyTorch's shapes: 1-3 padded dimensions, the input one or two more (a batch)
        k = len(pad) // 2
        if k not in (1, 2, 3) or x.ndim not in (k + 1, k + 2):
            raise UnsupportedShapeError(f"pad: padding size {len(pad)} is not supported for {x.ndim}D input "
                                        f"tensor with mode {mode!r} (padding size 2, 4 or 6 for an input of one "
                                        "or two more dimensions)")
        if mode != "circular" and not all(x.shape[1:]):
            raise ShapeError(f"pad: expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 batch size "
                             f"and other non-zero dimensions for input, but got: {list(x.shape)}")
    amounts = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        amounts[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    for d, (before, after) in enumerate(amounts):   # negative amounts crop first
        if before < 0 or after < 0:
            x = narrow(x, d, max(-before, 0), x.shape[d] - max(-before, 0) - max(-after, 0))
    amounts = [(max(b, 0), max(a, 0)) for b, a in amounts]
    if mode == "constant":
        return _pad_constant(x, amounts, 0.0 if value is None else float(value))
    for d, (before, after) in enumerate(amounts):
        if not before and not after:
            continue
        n = x.shape[d]
        if mode == "reflect" and (before >= n or after >= n):
            raise RuntimeError(f"pad: padding ({before}, {after}) should be less than the input dimension "
                               f"{d} of size {n} (shape {x.shape}) for reflect padding")
        if mode == "circular" and (before > n or after > n):
            raise RuntimeError(f"pad: padding ({before}, {after}) is larger than the input dimension {d} of "
                               f"size {n} (shape {x.shape}) for circular padding")
        if n == 0:
            raise RuntimeError(f"pad: cannot {mode}-pad an empty dimension {d} (shape {x.shape})")
        x = index_select(x, d, _pad_index(n, before, after, mode))
    return x


def _pad_constant(x, amounts, value):
    shape = tuple(n + b + a for n, (b, a) in zip(x.shape, amounts))
    if shape == x.shape:
        return x * 1
    starts = tuple(b for b, _ in amounts)
    src = x if x.dtype is f32 else x.to(f32)
    if not x.numel():
        out = zeros(shape, device=x.device)
    elif x.ndim > 4:   # one padded dimension at a time, the others folded around it
        out = src
        for d, (before, after) in enumerate(amounts):
            if before or after:
                out = folding.along(out, d, lambda y, _, b=before, a=after: PadTo.apply(
                    y, (0, b, 0), (y.shape[0], y.shape[1] + b + a, y.shape[2])))
    else:
        out = PadTo.apply(src, starts, shape)
    if value != 0.0:   # the value where there was no input, added to exact zeros (inf stays inf)
        fill = np.full(shape, value, dtype=np.float32)
        fill[tuple(slice(b, b + n) for (b, _), n in zip(amounts, x.shape))] = 0.0
        out = out + tensor(fill, device=x.device)
    return out if out.dtype is x.dtype else out.to(x.dtype)


# ---- one_hot -------------------------------------------------------------------------------------
@declare()
def one_hot(x, num_classes=-1):
    """(..., num_classes) int64 tensor with 1 at each entry's class.

    num_classes=-1 reads the values (one more than the largest); otherwise values computed on the
    device are checked by the graph's compute, host values at once.
    """
    if x.dtype.is_float:
        raise RuntimeError("one_hot is only applicable to index tensor (got a float tensor)")
    values = known_values(x)
    if values is None and num_classes < 0:
        values = x.numpy()
    if values is not None:
        if values.size and values.min() < 0:
            raise RuntimeError("one_hot: Class values must be non-negative.")
        if num_classes < 0:
            num_classes = int(values.max()) + 1 if values.size else 0
        if values.size and values.max() >= num_classes:
            raise RuntimeError("one_hot: Class values must be smaller than num_classes.")
    with no_grad(), device_locks.lock_of(x.device):
        labels = x.to(f32)
        if values is None:
            graph_of(x).check(count_outside(labels, 0.0, num_classes - 1.0),
                              RuntimeError(f"one_hot: a class value computed on the device is negative or not "
                                           f"smaller than num_classes ({num_classes})"))
        diff = labels.unsqueeze(-1) - arange(num_classes, device=x.device).to(f32)
        return (1.0 - un.Step.apply(un.abs(diff))).to(INT64)
