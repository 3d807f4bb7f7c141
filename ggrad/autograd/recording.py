"""Adding results and host data to a device's pending graph as Tensors; under `GGRAD_EAGER=1` each is
computed at once (execution.EAGER)."""

import numpy as np

from .. import ggml
from ..ggml.errors import ShapeError
from . import device_locks, execution
from .memory import pending_graph
from .pending import ne_of
from .tensor import Tensor


def emit(graph, node, shape, dtype):
    """The Tensor of numpy-order `shape` over `node`, a new result of an op in `graph`."""
    graph.add_result(node)
    t = Tensor._make(node, shape, dtype, graph.device, graph)
    if execution.EAGER and not (dtype.is_quantized and node.is_view):   # w.T is held as a view of w, which
        execution.realize(graph)                                       # it can be only once it is tracked
    return t


def leaf(device, array, dtype):
    """A Tensor on `device` holding a copy of host `array`, uploaded when its pending graph is computed."""
    return leaf_bytes(device, ggml.encode(np.array(array, order="C", copy=True), dtype), dtype, array.shape)


def leaf_bytes(device, raw, dtype, shape):
    """A Tensor on `device` of `dtype` and numpy-order `shape` holding the GGML-layout bytes `raw` (uint8)."""
    with device_locks.lock_of(device):   # looked up under the lock: another thread may be computing it
        graph = pending_graph(device)
        node = graph.new_leaf(dtype, ne_of(shape))
        if raw.nbytes != node.nbytes:
            raise ShapeError(f"{raw.nbytes} bytes do not hold a {dtype.name} tensor of shape {tuple(shape)} "
                             f"({node.nbytes} bytes)")
        t = Tensor._make(node, shape, dtype, graph.device, graph)
        graph.upload(node, raw, t)
        if execution.EAGER:
            execution.realize(graph)
        return t


def alias(t):
    """A new Tensor object for the same values, with no history (what `detach()` returns)."""
    with device_locks.lock_of(t.device):   # t's node and graph must not change under a compute of another thread
        a = Tensor._make(t._node, t.shape, t.dtype, t.device, t._pending, t._block)
    a._version = t._version
    return a
