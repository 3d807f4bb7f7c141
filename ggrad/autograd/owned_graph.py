"""`OwnedGraph`: a computed graph that keeps its own compute buffer, to be computed again at the same
addresses whatever else runs on the device in between.

A device's scheduler plans every graph into one compute buffer, so a kept graph (`execution.capture`)
stays valid only until the next compute of anything else. A replayed step (a decode step, a training
step: step_replay.py, compiled_step.py) takes the scheduler that just computed it instead: the device's
runtime starts a fresh one for its next graph, the cached entry leaves the graph cache (its nodes are
this graph's now), and the results of the recording that Python still holds, which live in the taken
buffer, become this graph's to move out before it computes again. The buffer is freed with the last of
the OwnedGraph and the results still in it (`Block.keep`); a step that records again drops its old one.
"""

import time
import weakref

from . import execution, memory
from .memory import Block
from .tensor import Tensor


class OwnedGraph:
    """The graph of Replay `replay` (just captured, on `device`) with the scheduler that computed it.
    `fixed`: held results that the caller reads in place after every compute (not moved out)."""

    def __init__(self, replay, device, fixed=()):
        rt = memory.runtime(device)
        self.device = device
        self.scheduler, self.graph = replay.scheduler, replay.graph
        # the graph's metadata, its uploads' and held host data's memory, the computed tensors it reads
        self._keep = (replay, replay.entry)
        fixed = {id(t._block) for t in fixed}
        self.held = [ref for ref in rt.hand_over(self.scheduler, replay.entry) if id(ref()) not in fixed]
        self._stored = {}   # id(node) -> (metadata over node's memory, weakref of its last Block): results()
        self._bytes = self.scheduler.buffer_size()   # planned once: the graph is never allocated again
        self._runtime = rt
        self._in_use = None   # what was in use at the last compute: (pool bytes, scheduler, owned graphs)
        rt.owned.add(self)

    def buffer_bytes(self):
        return self._bytes

    def compute(self):
        """Compute the graph again in its buffer, after moving the results of its last compute that are
        still held out of it."""
        rt = self._runtime
        if self.held:
            held, self.held = self.held, []
            rt.move_out(held)
        # the peak changes only with what this compute finds in use: not again for a replay after a replay
        in_use = (rt.pool.in_use, id(rt.scheduler), len(rt.owned))
        if in_use != self._in_use:
            self._in_use = in_use
            rt.peak = max(rt.peak, rt.pool.in_use + rt.compute_buffer_bytes() + rt.replay_buffer_bytes())
        start = time.perf_counter()
        self.scheduler.compute(self.graph, execution.eval_hook)   # ggrad.profile() sees replays too
        stats = memory.stats
        stats.compute_seconds += time.perf_counter() - start
        stats.computes += 1
        stats.step_replays += 1
        stats.nodes += self.graph.n_nodes

    def results(self, specs):
        """Tensors over the values the last compute left in `specs`' nodes, each (node, shape, dtype): valid
        until they are dropped (the next compute moves those still held). The metadata of a result whose
        Tensors are all gone is used again (a training step's gradients: one per parameter a step)."""
        homes = memory.Homes(len(specs))
        out, made = [], {}
        for node, shape, dtype in specs:
            block = made.get(id(node))
            if block is None:
                stored = homes.over(node, self._stored.get(id(node)))
                block = made[id(node)] = Block(None, None, stored, self.scheduler)
                ref = weakref.ref(block)
                self._stored[id(node)] = (stored, ref)
                self.held.append(ref)
            out.append(Tensor._make(block.node, shape, dtype, self.device, None, block))
        return out
