"""`StepReplay`: a step of fixed shapes (a decode step) recorded once, then computed again per call with
new values of its inputs and nothing else.

The graph cache (trace_cache.py) spares a repeated step the building and planning of its graph, but the
step's ops are still recorded in Python every time (a GPT decode step: ~170 ops). A step that changes only
the values of a few small inputs between calls (a token id, a position) needs none of that. Its inputs are
host tensors of the graph, not constants baked into it: a call writes their new bytes into the memory
the graph reads them from, computes the kept graph on its kept allocation and reads the outputs back.
Writes the step makes into persistent buffers (a KV cache's `index_write_`) happen again at every call.

Any other compute on the device lays the scheduler's memory out for its own graph; the next call then
records the step again (define-by-run: the same values come out) and replays from there. The inputs enter
the step as values on the device, so index ops clamp them into range (GGML's kernels assert); the check
that raises IndexError for an index out of range (pending.py's `check`) runs when the step is recorded,
not at replays: the caller keeps the inputs valid.
"""

import time

import numpy as np

from .. import ggml
from . import device_locks, execution, memory
from .factory import tensor
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
        self.records = 0       # times the step was recorded (1 while nothing else computes on the device)
        self._inputs = self._outputs = self._replay = None
        self._computes = -1    # memory.stats.computes after this step's last compute

    def __call__(self, *arrays):
        """The outputs as numpy arrays (a tuple when the step returns several)."""
        arrays = [np.ascontiguousarray(a) for a in arrays]
        with device_locks.lock_of(self.device):
            if not self._replayable(arrays):
                outputs = self._record(arrays)
            else:
                outputs = self._compute(arrays)
            self._computes = memory.stats.computes
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _replayable(self, arrays):
        if self._replay is None or memory.stats.computes != self._computes:
            return False
        return all(t.shape == a.shape and t.dtype.numpy == a.dtype for t, a in zip(self._inputs, arrays))

    def _record(self, arrays):
        # The inputs are computed before the step (with whatever was pending) and their values hidden from
        # the ops, which would otherwise build today's values into the graph (a constant index, a scale).
        inputs = [tensor(a, device=self.device) for a in arrays]
        execution.realize(self.device)
        for t in inputs:
            hide_values(t)
        outputs = self.step(*inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        with execution.capture() as replays:
            execution.realize(self.device)
        self.records += 1
        # inputs and outputs are held: their memory is where the graph reads and writes them
        self._replay = replays[0] if len(replays) == 1 else None
        self._inputs, self._outputs = inputs, outputs
        return [t.numpy() for t in outputs]

    def _compute(self, arrays):
        for t, a in zip(self._inputs, arrays):
            t._node.write(ggml.encode(a, t.dtype))
        replay = self._replay
        start = time.perf_counter()
        replay.scheduler.compute(replay.graph, execution.eval_hook)   # ggrad.profile() sees replays too
        stats = memory.stats
        stats.compute_seconds += time.perf_counter() - start
        stats.computes += 1
        stats.step_replays += 1
        stats.nodes += replay.graph.n_nodes
        return [ggml.get_data(t._node, t.shape) for t in self._outputs]
