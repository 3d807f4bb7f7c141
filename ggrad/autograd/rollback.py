"""Undoing a compute that failed: a failure while planning, uploading or computing leaves nothing half-done.

A compute changes state in three phases (execution.py): the plan moves held tensors onto other nodes
(copies of views, results routed off a GPU), places held host data and uploads in pooled buffers and lets
the scheduler place the rest; the upload writes host data into them; the compute writes results. When any
of these raises (the plan does not fit in memory, a device is lost, an interrupt), `Undo.roll_back` returns
the device to the state before the compute: every held Tensor on its old node, every node this compute
placed unplaced and its pooled buffer given back, a replayed cache entry dropped (its nodes become the
graph's own, planned afresh), and the graph pending again, so that the next read computes it anew.

So a failed step can be computed again (`ggrad.realize()`) and trains as without the failure. The held
tensors keep their pending work: while one whose compute cannot succeed (more memory than the device
has) is held, each compute of its device's graph fails the same way; once it is dropped the rest computes.
"""

from ..ggml import placement


class Undo:
    """What one compute of `pending` on runtime `rt`, holding the Tensors `alive`, must put back if it fails:
    `trace` is the graph cache's trace it replays or recorded, `current` whether `pending` was the device's
    pending graph. The plan notes here what it places (`placed`, `taken`)."""

    __slots__ = ("rt", "pending", "alive", "nodes", "trace", "current", "taken", "placed")

    def __init__(self, rt, pending, alive, trace, current):
        self.rt, self.pending, self.alive, self.trace, self.current = rt, pending, alive, trace, current
        self.nodes = [t._node for t in alive]   # the plan and a replay move views and routed results
        self.taken = []     # pooled buffers handed out that no Block owns yet
        self.placed = []    # node pointers the plan or the scheduler may have placed

    def place(self, buffer, node, owned):
        """Place `node` in pooled `buffer`, noting both; `owned`: a Block already returns the buffer."""
        buffer.place(node)
        self.placed.append(node.ptr)
        if not owned:
            self.taken.append(buffer)

    def roll_back(self):
        """Put everything back as it was before the compute (see the module docstring)."""
        rt, pending = self.rt, self.pending
        for t, node in zip(self.alive, self.nodes):
            t._held_as(node)
        trace = self.trace
        if trace is not None and trace.entry is not None:   # a replay: the entry's plan is not trusted again
            trace.diverge(pending)
        placement.unplace(self.placed)
        for buffer in self.taken:
            rt.pool.give(buffer)
        rt.planned_for = None
        if self.current and rt.graph.is_empty():   # nothing can have been added to its successor meanwhile
            rt.graph = pending
