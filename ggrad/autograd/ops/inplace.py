"""`index_write_`: write slices into a tensor's own memory, as an in-place effect of the pending graph.

ggrad's in-place methods (`x.add_`, `x[i] = v`, `copy_`) rebind the Tensor to a new value and never
overwrite memory. A key/value cache needs the opposite: one new row written into a large buffer per
step, at the cost of that row. `index_write_` is GGML's `set_rows` on the buffer itself (as the
optimizers' fused updates, optim/fused_updates.py, are): the write runs when the graph is computed, and the
Tensor it returns reads the buffer after the write, since its node is the write's own result.
(A `cpy` into a view of the buffer would write the same bytes, but its result views only the rows
written: a read of the whole prefix would not depend on it, and effects are computed after the held
results, so the read could run first. `set_rows`' result is a view of the whole buffer.)
"""

import numbers
import weakref

import numpy as np

from ... import ggml
from ...ggml import ops
from ...ggml.errors import DTypeError, ShapeError
from .. import device_locks, grad_mode, memory
from ..memory import graph_of
from ..recording import emit, leaf
from ..tensor import Tensor, _axis
from .indexing import checked_index

_FLOATS = ("f32", "f16")
# target Tensor -> (pending graph, target's node, the latest write's result node): a second write into
# the same target before a compute is built on the first, so writes land in the order they were made.
_latest = {}   # id(target) -> (weakref to it, graph, node, written): by identity, as == is elementwise
# id(index Tensor) -> (weakref to it, the dimension's size, its checked rows Tensor): _checked_rows
_checked = {}


def index_write_(target, dim, index, source):
    """Write `source` into `target` at `index` along `dim`, in target's memory; return target's new values.

    As `torch.Tensor.index_copy_(dim, index, source)` (target[..., index[i], ...] = source[..., i, ...]),
    except that the write is an effect of the pending graph on target's own memory, not a rebind:
    the returned Tensor is target after the write; a read of `target` itself recorded in the same
    pending graph is not ordered after the write (read the result, or compute first). Not differentiable.

    Args:
        target (Tensor): a contiguous f32 or f16 tensor (it is computed first if it is a pending result).
        dim (int): the dimension indexed.
        index (int | sequence of int | numpy array | Tensor): positions, each in [0, target.shape[dim]);
            a 1-D integer Tensor is an input of the graph (a decode step's cache slot, replayed with new
            values: autograd/step_replay.py); its values are checked as `index_select`'s are.
        source (Tensor): target's shape except `len(index)` at `dim`, float, on target's device.
    """
    d = _axis(dim, target.ndim)
    if isinstance(index, Tensor):
        if index.ndim != 1:
            raise TypeError(f"index_write_: a Tensor index must be 1-D, got shape {tuple(index.shape)}")
        rows = _checked_rows(index, target.shape[d], target.device, d)
        n = index.shape[0]
    else:
        positions = _positions(index, target.shape[d])
        rows, n = None, len(positions)
    _check(target, d, n, source)
    if target._pending is not None and not target._node.is_leaf:
        target.realize()   # the write must land in memory that outlives the compute
    if source.dtype.name not in _FLOATS:
        source = source.to(ggml.f32)
    outer = int(np.prod(target.shape[:d], dtype=np.int64))
    inner = int(np.prod(target.shape[d + 1:], dtype=np.int64))
    if rows is None:
        rows = leaf(target.device, positions, ggml.i32)
    with device_locks.lock_of(target.device):
        graph = graph_of(target, source, rows)
        node = graph.node(target)   # keeps target's memory alive until the compute
        entry = _latest.get(id(target))
        latest = entry[1:] if entry is not None and entry[0]() is target else None
        base = latest[2] if latest is not None and latest[0] is graph and latest[1] is node else node
        src, where = graph.contiguous(source), graph.node(rows)
        # events of the graph cache's trace (pending.py), so that a decode step writing its cache replays
        written = graph.event(("index_write_", inner, target.shape[d], outer, n), (base, src, where),
                              lambda: ops.set_rows(graph.ctx, ops.reshape_3d(graph.ctx, base, inner, target.shape[d],
                                                                             outer),
                                                   ops.reshape_3d(graph.ctx, src, inner, n, outer), where))
        graph.update_in_place(written)
        key = id(target)
        _latest[key] = (weakref.ref(target, lambda _, key=key: _latest.pop(key, None)), graph, node, written)
        ne = tuple(node.ne)
        return emit(graph, graph.event(("index_write_ view", ne), (written,),
                                      lambda: ops.reshape_4d(graph.ctx, written, *ne)), target.shape, target.dtype)


def _checked_rows(index, size, device, d):
    """`checked_index` of a Tensor index, made once per pending graph: a decode step's fed cache slot serves
    every layer's key and value writes, and each check is ~10 one-element nodes of the step's graph."""
    key = id(index)
    hit = _checked.get(key)
    if hit is not None and hit[0]() is index and hit[1] == size and hit[2]._pending is not None:
        if hit[2]._pending is memory.pending_graph(device):
            return hit[2]
    rows = checked_index(index, size, device, "index_write_", dim=d)
    if rows is not index:   # index itself (host data, checked at once) needs no second check
        _checked[key] = (weakref.ref(index, lambda _, key=key: _checked.pop(key, None)), size, rows)
    return rows


def _positions(index, size):
    if isinstance(index, numbers.Integral):
        index = [index]
    positions = np.asarray(index)
    integral = positions.dtype.kind in "iu" or positions.size == 0
    if positions.ndim != 1 or not integral:
        raise TypeError(f"index_write_: index must be an int or a 1-D sequence of ints, got {index!r}")
    if positions.size and (positions.min() < 0 or positions.max() >= size):
        raise IndexError(f"index_write_: index {positions.tolist()} is out of range for a dimension of size {size}")
    return positions.astype(np.int32)


def _check(target, d, n, source):
    if target.dtype.name not in _FLOATS:
        raise DTypeError(f"index_write_: target must be float32 or float16, got {target.dtype.name}")
    if not source.dtype.is_float:
        raise DTypeError(f"index_write_: source must be a float tensor, got {source.dtype.name}")
    want = target.shape[:d] + (n,) + target.shape[d + 1:]
    if source.shape != want:
        raise ShapeError(f"index_write_: source of shape {source.shape} should be {want} (target {target.shape}, "
                         f"{n} positions along dim {d})")
    if not n:
        raise ShapeError("index_write_: index is empty (nothing to write)")
    if 0 in source.shape:   # a zero-size node must not reach GGML's set_rows (it aborts on it)
        raise ShapeError(f"index_write_: source of shape {source.shape} is empty (nothing to write; target "
                         f"{target.shape})")
    if not target._node.is_contiguous:
        raise ShapeError(f"index_write_: target of shape {target.shape} must be contiguous (a strided view "
                         "has no memory of its own to write into)")
    if source.requires_grad and grad_mode.is_grad_enabled():
        raise RuntimeError("index_write_ is not differentiable: call it under ggrad.no_grad() or detach the source")
