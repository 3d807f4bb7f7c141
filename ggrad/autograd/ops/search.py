"""PyTorch's searches over sorted values and its set ops: bucketize, searchsorted (comparisons counted on the
device), unique and unique_consecutive (on the host: their length depends on the data, so PyTorch reads the
values back too)."""

import numpy as np

from ..arguments import FLAG, INT, TENSOR, kinds, require
from ..factory import tensor
from ..grad_mode import no_grad
from ..tensor import Tensor, _axis
from ..torch_dtypes import INT64
from ...ggml import i32
from ..declaration import declare


def _count_below(values, boundaries, right):
    """For each value, how many boundaries (along their last dim) are below it (or not above, with right)."""
    with no_grad():
        v, b = values.unsqueeze(-1), boundaries.unsqueeze(-2) if boundaries.ndim > 1 else boundaries
        below = (b <= v) if right else (b < v)
        return below.long().sum(-1)


@declare()
def bucketize(input, boundaries, *, out_int32=False, right=False):  # noqa: A002 (PyTorch's names)
    """The index of the bucket of each element among the sorted 1-D `boundaries`: i with
    boundaries[i-1] < x <= boundaries[i] (right=False) or boundaries[i-1] <= x < boundaries[i] (right=True)."""
    require("bucketize", "boundaries", boundaries, TENSOR)
    if boundaries.ndim != 1:
        raise RuntimeError("boundaries tensor must be 1 dimension, but got dim(" +
                           str(getattr(boundaries, "ndim", "?")) + ")")
    scalar = not isinstance(input, Tensor)
    values = tensor(input, device=boundaries.device) if scalar else input
    out = _count_below(values, boundaries, right)
    return out.to(i32) if out_int32 else out


@kinds(input=None)
@declare()
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):  # noqa: A002
    """Where each value would be inserted into `sorted_sequence` (along its last dim; its leading dims match
    input's) to keep it sorted: the first such place, or the last with right=True / side="right"."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of left "
                               "while right was True")
        right = side == "right"
    if sorter is not None:
        sorted_sequence = sorted_sequence.gather(-1, sorter)
    values = input if isinstance(input, Tensor) else tensor(input, device=sorted_sequence.device)
    if not isinstance(input, Tensor) and sorted_sequence.ndim > 1:
        raise RuntimeError(f"torch.searchsorted(): input value can be a scalar only when boundaries tensor dimension "
                           f"is 1, but we got boundaries tensor dim({sorted_sequence.ndim})")
    if sorted_sequence.ndim > 1 and tuple(sorted_sequence.shape[:-1]) != tuple(values.shape[:-1]):
        raise RuntimeError(f"torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                           f"dimensions of boundaries tensor and input value tensor must match, but we got "
                           f"boundaries tensor {list(sorted_sequence.shape)} and input value tensor "
                           f"{list(values.shape)}")
    out = _count_below(values, sorted_sequence, right)
    return out.to(i32) if out_int32 else out


def _results(values, inverse, counts, like, return_inverse, return_counts, inverse_shape):
    out = [tensor(values, dtype=like.dtype, device=like.device)]
    if return_inverse:
        out.append(tensor(inverse.reshape(inverse_shape).astype(np.int64), dtype=INT64, device=like.device))
    if return_counts:
        out.append(tensor(counts.astype(np.int64), dtype=INT64, device=like.device))
    return out[0] if len(out) == 1 else tuple(out)


def _check_flags(op, input, dim, **flags):
    """PyTorch's parse: input a Tensor, the flags bools, dim an int in range."""
    require(op, "input", input, TENSOR)
    for value in flags.values():
        if isinstance(value, Tensor):
            bool(value)   # PyTorch's Python layer reads a flag Tensor's truth first: RuntimeError beyond one element
    for name, value in flags.items():
        if not isinstance(value, Tensor):
            require(op, name, value, FLAG)
    if dim is not None:
        require(op, "dim", dim, INT)
        _axis(dim, input.ndim)


@declare(method=True)
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The distinct values (sorted), with the index of each element's value (`return_inverse`) and how often
    each occurs (`return_counts`); with `dim`, the distinct slices along it."""
    _check_flags("unique", input, dim, sorted=sorted, return_inverse=return_inverse, return_counts=return_counts)
    host = input.detach().numpy()
    if dim is None:
        values, inverse, counts = np.unique(host, return_inverse=True, return_counts=True)
        return _results(values, inverse, counts, input, return_inverse, return_counts, input.shape)
    d = dim % max(input.ndim, 1)
    values, inverse, counts = np.unique(host, return_inverse=True, return_counts=True, axis=d)
    return _results(values, inverse, counts, input, return_inverse, return_counts, (input.shape[d],))


@declare(method=True)
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """Each run of equal consecutive values (or slices along `dim`) kept once."""
    _check_flags("unique_consecutive", input, dim, return_inverse=return_inverse, return_counts=return_counts)
    host = input.detach().numpy()
    d = 0 if dim is None else dim % max(host.ndim, 1)
    flat = host.reshape(-1) if dim is None else np.moveaxis(host, d, 0)
    if flat.shape[0] == 0:
        changes = np.zeros(0, bool)
    else:
        same = np.all((flat[1:] == flat[:-1]).reshape(flat.shape[0] - 1, -1), axis=1)
        changes = np.concatenate([[True], ~same])
    starts = np.flatnonzero(changes)
    values = flat[starts] if dim is None else np.moveaxis(flat[starts], 0, d)
    inverse = np.cumsum(changes) - 1
    counts = np.diff(np.append(starts, flat.shape[0]))
    shape = input.shape if dim is None else (input.shape[d],)
    return _results(values, inverse, counts, input, return_inverse, return_counts, shape)
