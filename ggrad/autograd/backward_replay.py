"""Replaying a recorded backward pass: a step whose forward replayed a cached trace skips the Python of its
`loss.backward()` when the autograd graph behind the loss is the one recorded.

The graph cache (trace_cache.py) replays each event's GGML nodes, but the backward pass still runs every
gradient rule in Python only to meet those events again (a third of the W2 step's host time). A backward
pass is a function of the autograd graph it walks: each node's Function and saved context (made by the
forward's events, which the replay matched), which inputs need a gradient, where each gradient goes, and
the leaves' dtypes. So when `loss.backward()` starts at the position of a replayed entry where a backward
was recorded, and the graph's signature is the recorded one, the pass would make the recorded events in
the recorded order: they are taken as one block (their nodes, uploads and effects), each leaf gets its
gradient's node as `.grad`, and the graph is freed as the pass frees it.

A pass is recorded only where nothing outside the signature can have shaped it: `backward()` of a loss
with its implicit gradient; no retain_graph or create_graph; no tensor, leaf or saved-tensor hooks (the
half tensors autocast keeps are ggrad's own packing) and no retain_grad; anomaly mode off; every node's
rule ggrad's own (`Function._replayable`: Primitives, autocast's products and roundings; a user's
Function runs its backward every time); empty `.grad`s; no read of host values (`.numpy()`, `.item()`,
host data still to upload) and no compute during it; no computed input first met in it; one device.
Otherwise the pass runs as always.
"""

from . import anomaly_mode, hooks, memory
from .tensor import Tensor
from .graph import current_hooks
from .roundings import kept_half_unpack


class Record:
    """What one backward pass did to a trace, from event `start` to `end`: the signature it ran on, the
    nodes whose rules ran (by topological position), each leaf's gradient (leaf position, node, shape,
    dtype), and the bookkeeping its events left (origins, emit order, uploads, effects)."""

    __slots__ = ("start", "end", "signature", "visited", "grads", "origins", "result_order", "uploads",
                 "in_place_updates")


def signature(root, order):
    """(signature, leaves) of the backward from `root` over the nodes `order` (topological, root first), or
    (None, None) where a pass over it must run as written."""
    position = {id(node): i for i, node in enumerate(order)}
    leaves, leaf_position, parts = [], {}, []
    device = root.device
    for node in order:
        ctx = node.ctx
        if node.hooks or node.retained or not node.fn._replayable or ctx._freed or _user_hooked(ctx):
            return None, None
        if any(spec[2] is not device for spec in node.outputs):   # another device's trace would be skipped
            return None, None
        edges = []
        for edge in node.next_edges:
            if edge is None or edge.__class__ is tuple:
                edges.append(edge if edge is None else (position[id(edge[0])], edge[1]))
                continue
            k = leaf_position.get(id(edge))
            if k is None:
                if edge.grad is not None or edge.device is not device:
                    return None, None
                k = leaf_position[id(edge)] = len(leaves)
                leaves.append(edge)
            edges.append(-1 - k)
        parts.append((node.fn, ctx.needs_input_grad, tuple(edges), ctx._materialize))
    parts.extend((leaf.shape, leaf.dtype) for leaf in leaves)
    return (root._output_nr, tuple(parts)), leaves


def _user_hooked(ctx):
    """Whether saved_tensors_hooks packed ctx's saved tensors (their unpack runs the user's Python): the
    half tensors autocast keeps are packed too, but their unpack is ggrad's own conversion."""
    hooked = ctx._hooked
    return hooked is not None and hooked[0] is not kept_half_unpack


def trace_of(root):
    """The trace of root's pending graph when a backward from it may be recorded or replayed, else None."""
    if hooks.leaf_table or anomaly_mode.is_anomaly_enabled() or current_hooks() is not None:
        return None
    graph = root._pending
    if graph is None or memory.runtime(root.device).graph is not graph:
        return None
    trace = graph.trace
    return trace if trace is not None and not trace.depth else None


def replay(root, order, trace):
    """Take the recorded backward from `root` (over `order`, in `trace`) if one matches here (True), else do
    nothing (False)."""
    if trace.entry is None or not trace.entry.backwards:
        return False
    record = trace.entry.backwards.get(trace.pos)
    if record is None:
        return False
    sig, leaves = signature(root, order)
    if sig != record.signature:
        return False
    if any(order[i].ctx._changed_in_place() is not None for i in record.visited):
        return False   # the pass as written raises, as saved_tensors does
    graph = root._pending
    graph.redo(record.uploads, record.in_place_updates, record.result_order)
    trace.origins.update(record.origins)
    trace.pos = record.end
    for k, node, shape, dtype in record.grads:
        leaves[k].grad = Tensor._make(node, shape, dtype, root.device, graph)
    for i in record.visited:
        order[i].ctx._free()
    memory.stats.backward_replays += 1
    return True


class Recorder:
    """Watches one backward pass that runs as written (made before it, `finish` after it) and keeps it as a
    Record on its trace, or on the entry the trace replays, where it qualifies."""

    def __init__(self, root, order, trace):
        self.trace = trace
        self.signature, self.leaves = signature(root, order)
        if self.signature is None:
            self.trace = None
            return
        self.root, self.order = root, order
        graph = self.graph = root._pending
        self.entry, self.start = trace.entry, trace.pos
        self.marks = (graph.marks(), len(trace.origins), trace.inputs_met, memory.stats.host_reads,
                      memory.stats.computes)

    def finish(self):
        trace = self.trace
        if trace is None:
            return
        graph = self.graph
        if memory.runtime(self.root.device).graph is not graph or graph.trace is not trace:
            return
        graph_marks, origins, met, reads, computes = self.marks
        if (trace.entry is not self.entry or not trace.cacheable or trace.depth or trace.inputs_met != met
                or memory.stats.host_reads != reads or memory.stats.computes != computes):
            return
        grads = []
        for k, leaf in enumerate(self.leaves):
            g = leaf.grad
            if g is None:
                continue
            mark = trace.origins.get(id(g._node))
            if g._pending is not graph or mark is None or (mark.__class__ is tuple and mark[0] == "computed"):
                return   # a gradient that is no event's node (a stand-in of a computed tensor)
            grads.append((k, g._node, g.shape, g.dtype))
        record = Record()
        record.start, record.end, record.signature = self.start, trace.pos, self.signature
        record.visited = tuple(i for i, node in enumerate(self.order) if node.freed)
        record.grads = tuple(grads)
        record.origins = list(trace.origins.items())[origins:]
        record.uploads, record.in_place_updates, record.result_order = graph.since(graph_marks, results=True)
        owner = trace if trace.entry is None else trace.entry
        if owner.backwards is None:
            owner.backwards = {}
        owner.backwards[record.start] = record
