"""`StepReplay`: a step of fixed shapes (a decode step) recorded once, then computed again per call with
new values of its inputs and nothing else.

The graph cache (trace_cache.py) spares a repeated step the building and planning of its graph, but the
step's ops are still recorded in Python every time (a GPT decode step: ~170 ops). A step that changes only
the values of a few small inputs between calls (a token id, a position) needs none of that. Its inputs are
host tensors of the graph, not constants baked into it: a call writes their new bytes into the memory
the graph reads them from, computes the kept graph on its kept allocation and reads the outputs back.
Writes the step makes into persistent buffers (a KV cache's `index_write_`) happen again at every call.

The recorded graph keeps the compute buffer it was planned in (owned_graph.py), so other computes on the
device between two calls (an evaluation, another model) do not make the step record again. The inputs enter
the step as values on the device; those that index (an embedding's ids, a cache slot) are checked here, on
the host, against the sizes they index at every call (an IndexError, nothing computed), so the graph holds
neither clamps nor device-side checks of them (host_index.hide_values). Where the device's memory is the
host's, inputs and outputs are copied through numpy views of the graph's tensors kept from the recording.
"""

import numpy as np

from .. import ggml
from . import device_locks, execution
from .factory import tensor
from .owned_graph import OwnedGraph
from ..ggml.errors import IndexOutOfRangeError
from .ops.host_index import hide_values


class StepReplay:
    """`step(*inputs) -> outputs` (Tensors) on `device`, called with numpy arrays for the inputs.

    Args:
        step (callable): builds the step from input Tensors (one per array, same dtype and shape) and
            returns a Tensor or a tuple of Tensors; runs under the caller's grad mode.
        device: where the inputs are placed (the step's parameters live there).
    """

    def __init__(self, step, device):
        self.step = step
        self.device = ggml.device(device)
        self.lock = device_locks.lock_of(self.device)
        self.records = 0       # times the step was recorded
        self._inputs = self._outputs = self._replay = None
        self._bounds = self._writes = self._reads = self._flat_bounds = ()
        self._signature = None   # the inputs' (shape, dtype) the recorded step takes

    def __call__(self, *arrays):
        """The outputs as numpy arrays (a tuple when the step returns several)."""
        arrays = [np.ascontiguousarray(a) for a in arrays]
        with self.lock:
            if self._replay is None or [(a.shape, a.dtype) for a in arrays] != self._signature:
                outputs = self._record(arrays)
            else:
                _check_indices(arrays, self._bounds)
                outputs = self._compute(arrays)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def in_place(self):
        """Numpy views (inputs, outputs) of the memory the recorded step reads its inputs from and leaves its
        outputs in, or None where that is not host memory or nothing is recorded: a caller that writes the
        next inputs there and calls `replay()` spares the copies and checks of `__call__` (a decode loop)."""
        if self._replay is None or any(v is None for v in (*self._writes, *self._reads)):
            return None
        return list(self._writes), list(self._reads)

    def replay(self):
        """Compute the recorded step again on the values its inputs hold now (written through `in_place`'s
        views), its index inputs checked first; the outputs are left in `in_place`'s views."""
        with self.lock:
            for i, values, size in self._flat_bounds:   # Python ints: no numpy call between two computes
                for v in values:
                    if not 0 <= v < size:
                        raise IndexOutOfRangeError(f"StepReplay: input {i} indexes a dimension of size {size}, "
                                                   f"got the index {v} (out of bounds)")
            self._replay.compute()

    def _record(self, arrays):
        # The inputs are computed before the step (with whatever was pending) and their values hidden from
        # the ops, which would otherwise build today's values into the graph (a constant index, a scale).
        inputs = [tensor(a, device=self.device) for a in arrays]
        execution.realize(self.device)
        uses = [[] if t.dtype is ggml.i32 else None for t in inputs]
        for t, sizes in zip(inputs, uses):
            hide_values(t, sizes)
        outputs = self.step(*inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        bounds = [min(sizes) if sizes else None for sizes in uses]
        error = _index_error(arrays, bounds)
        if error is not None:   # computed with the indices clamped (as GGML needs them), then raised
            for t, a, size in zip(inputs, arrays, bounds):
                if size is not None:
                    t._node.write(np.clip(a, 0, size - 1))
        with execution.capture() as replays:
            execution.realize(self.device)
        if error is not None:
            self._replay = None
            raise error
        self.records += 1
        # inputs and outputs are held: their memory is where the graph reads and writes them
        self._replay = None
        if len(replays) == 1:
            self._replay = OwnedGraph(replays[0], self.device, fixed=outputs)
        results = [t.numpy() for t in outputs]
        self._inputs, self._outputs, self._bounds = inputs, outputs, bounds
        self._signature = [(tuple(t.shape), t.dtype.numpy) for t in inputs]
        self._writes = [_host_view(t) for t in inputs]
        self._reads = [_host_view(t) for t in outputs]
        self._flat_bounds = [(i, memoryview(view.reshape(-1)), size)
                             for i, (view, size) in enumerate(zip(self._writes, bounds))
                             if size is not None and view is not None]
        return results

    def _compute(self, arrays):
        for t, view, a in zip(self._inputs, self._writes, arrays):
            if view is not None:
                view[...] = a
            else:
                t._node.write(ggml.encode(a, t.dtype))
        self._replay.compute()
        return [view.copy() if view is not None else ggml.get_data(t._node, t.shape)
                for t, view in zip(self._outputs, self._reads)]


def _host_view(t):
    """A numpy view of Tensor t's memory (as `ggml.get_data` reads it: its node's dtype, t's shape) where
    that is host memory in a dtype numpy has, else None."""
    node = t._node
    dtype = node.dtype.numpy
    if dtype is None or node.dtype.name == "bf16" or not node.is_contiguous:
        return None
    raw = ggml.data.host_bytes(node)
    return None if raw is None else raw.view(dtype).reshape(t.shape)


def _index_error(arrays, bounds):
    """IndexError for the first input whose values leave [0, size) of the size it indexes, else None."""
    for i, (a, size) in enumerate(zip(arrays, bounds)):
        if size is not None and a.size and (a.view(np.uint32) >= size).any():   # negative: huge unsigned
            bad = a[(a < 0) | (a >= size)].flat[0]
            return IndexOutOfRangeError(f"StepReplay: input {i} indexes a dimension of size {size}, got the "
                                        f"index {bad} (out of bounds)")
    return None


def _check_indices(arrays, bounds):
    error = _index_error(arrays, bounds)
    if error is not None:
        raise error
