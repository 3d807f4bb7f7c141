"""`x[index]` gathered on the host: when x's bytes are host memory (a CPU tensor, or host data still to
be uploaded) and the integer indices are known on the host, numpy picks the rows into a new host leaf.
No graph is recorded and nothing is computed: batching a dataset (`data[perm[i:i + b]]`) costs what
numpy's gather costs, not a graph compute and two device reads. A tensor that needs a gradient, and
anything else (slices, several index tensors, strided views, device memory), takes the graph path."""

import weakref

import numpy as np

from ...ggml import data
from ...ggml.errors import IndexOutOfRangeError
from .. import device_locks, grad_mode, memory
from ..recording import leaf_bytes
from ..tensor import Tensor


# id -> (weak reference, bounds) of the Tensors whose values ops must not read while they record (hide_values)
_hidden = {}


def hide_values(t, bounds=None):
    """Make the values of Tensor `t` unknown to the ops that read host values while they record (here,
    indexing.known_values) and would build them into the graph: a step replayed with new values written
    into `t` (step_replay.py) must not keep the ones `t` held when it was recorded.

    `bounds` (a list): the caller's promise to check t's values on the host before every compute of the
    graph; an index op that takes t as its index appends the size it indexes (`index_bounds`) instead of
    clamping t into range and counting the values outside on the device (~10 one-element nodes a use).
    """
    key = id(t)
    _hidden[key] = (weakref.ref(t, lambda _, key=key: _hidden.pop(key, None)), bounds)


def is_hidden(t):
    return id(t) in _hidden


def index_bounds(t):
    """The list of sizes that hidden Tensor `t`'s owner checks its values against (hide_values), or None."""
    entry = _hidden.get(id(t))
    return None if entry is None or entry[0]() is not t else entry[1]


def rows(x, key):
    """`x[key]` for an integer index `key` (Tensor, numpy array or list) along dimension 0 as a host
    leaf, or None when the graph must compute it. Out-of-range indices raise IndexError as PyTorch."""
    if not x.ndim or (x.requires_grad and grad_mode.is_grad_enabled()):
        return None
    positions = _host_indices(key)
    if positions is None or positions.ndim + x.ndim - 1 > 4:
        return None
    with device_locks.lock_of(x.device):
        raw = _host_bytes(x)
        if raw is None:
            return None
        picked = _gather_rows(raw.reshape(x.shape[0], -1), positions.reshape(-1))
    return leaf_bytes(x.device, picked.reshape(-1), x.dtype, positions.shape + x.shape[1:])


def _gather_rows(rows, at):
    """rows[at] for byte rows, negative positions wrapped and out-of-range ones an IndexError as PyTorch
    (np.take's own checks: one pass). Rows are read as the widest unsigned words that divide them (numpy
    gathers a row of one 8-byte word several times faster than a row of 8 single bytes)."""
    width = rows.shape[1]
    word = next((w for w in (np.uint64, np.uint32, np.uint16) if width % np.dtype(w).itemsize == 0), np.uint8)
    try:
        return np.take(rows.view(word), at, axis=0).view(np.uint8)
    except IndexError:
        bad = at[(at < -len(rows)) | (at >= len(rows))][0]
        raise IndexOutOfRangeError(f"index: index {bad} is out of bounds for dimension 0 with size "
                                   f"{len(rows)}") from None


def _host_indices(key):
    """The values of an integer index held on the host (numpy array), else None."""
    if isinstance(key, Tensor):
        if key.dtype.is_float or key.dtype.name in ("bool", "i8", "u8", "i16") or key.numel() == 0:
            return None
        return _host_values(key)
    if isinstance(key, list) and not all(v.__class__ is int for v in key):
        return None   # nested lists, Tensors or bools inside: the graph path sorts them out
    if isinstance(key, (list, np.ndarray)):
        values = np.asarray(key)
        return values if values.size and values.dtype.kind in "iu" else None
    return None


def _host_values(t):
    """t's integer values copied from its host bytes, else None (a copy: a result of the last compute moves
    before the next one)."""
    with device_locks.lock_of(t.device):
        raw = _host_bytes(t)
        return None if raw is None else np.frombuffer(raw, dtype=t._node.dtype.numpy).reshape(t.shape).copy()


def _host_bytes(t):
    """t's bytes in GGML's layout (uint8, no copy) when they are host memory and not hidden, else None."""
    if id(t) in _hidden:
        return None
    pending = t._pending
    memory.stats.host_reads += 1
    if pending is not None:
        return pending.host_bytes(t) if pending.__class__ is not memory.FailedGraph else None
    return data.host_bytes(t._node) if t._node.is_packed else None
