"""The graph cache: a step whose recorded trace repeats reuses the GGML nodes, graph and allocation of
an earlier step instead of building them again.

Every GGML node of a pending graph is made inside an *event* (`PendingGraph.event`): a Primitive's
build, a contiguous copy, a host leaf, an optimizer update. An event's key is what decides the nodes it
makes: the op and its non-tensor arguments, and for each input node where it comes from (the index of
the event of this trace that made it, or for a computed tensor its position among the trace's computed
inputs and its layout: computed inputs enter as stand-in leaves over their memory, `Trace.external`).
While a step records, each key is compared with the same position of a cached trace (an `Entry`); while
they agree the event returns the cached node and builds nothing. At the compute, a trace that replayed an entry to its end with the same
held results and updates runs the entry's graph again: only new host data is uploaded and held results
get fresh memory. Any difference (another key, an op that makes nodes outside an event, other held
results) hands the replayed nodes back to the pending graph as ordinary unallocated nodes
(`Trace.diverge`) and the step builds and plans as without the cache: define-by-run semantics hold.

A replayed trace may also replay a recorded `loss.backward()` as one block (backward_replay.py: an
Entry's `backwards`). `ggrad.set_graph_cache(False)` (execution.py) turns both off (the A/B switch of the
benchmarks); `GGRAD_GRAPH_CACHE=0` too.
"""

import os

from ..ggml import DType, GTensor as GNode, placement

ENABLED = os.environ.get("GGRAD_GRAPH_CACHE", "1") not in ("", "0")
MAX_ENTRIES = 4   # cached traces per device (a training step, an evaluation step, ...)


class _Incomparable:
    """An argument the cache cannot compare by value: the key holding it matches no other key."""

    __slots__ = ()

    def __eq__(self, other):
        return False

    __hash__ = object.__hash__


def attr_key(a):
    """A value that equals another's exactly when the two arguments build the same GGML nodes: ints and
    strs stand for themselves (no int equals a str); bools, which equal the ints 0 and 1, None (a Tensor
    argument's place in `primitive_key`) and floats are tagged with their class."""
    c = a.__class__
    if c is int or c is str:
        return a
    if c is bool or a is None:
        return (c, a)
    if c is float:
        return (c, a.hex())   # -0.0 and nan compare as they build
    if c is tuple or c is list:
        return (c, tuple([attr_key(v) for v in a]))
    if c is slice:
        return (c, attr_key(a.start), attr_key(a.stop), attr_key(a.step))
    module = getattr(c, "__module__", "")
    if module == "numpy" and hasattr(a, "tobytes"):
        return (c, str(a.dtype), a.shape, a.tobytes())
    if isinstance(a, DType) or isinstance(a, type) or callable(a) and hasattr(a, "__code__"):
        return a   # dtypes, classes and functions: compared by identity
    return _Incomparable()


def primitive_key(cls, shapes, inputs):
    """The event key of Primitive `cls` applied to `inputs` (the nodes of its Tensors of `shapes`, the
    other arguments as they are)."""
    return (cls, shapes, tuple([None if a.__class__ is GNode else attr_key(a) for a in inputs]))


class Entry:
    """A computed trace kept for reuse: per event its key, result node and side effects; the graph, the
    held results and updates it computed, and the memory plan around them."""

    __slots__ = ("keys", "nodes", "replays", "contexts", "graph", "outputs", "in_place_updates", "view_conts",
                 "uploads", "scratch", "planned", "output_views", "externals", "proxies", "layouts",
                 "proxy_views", "lowering", "buffers", "sizes", "backwards", "rehomed")

    def release(self):
        """Hand every node this entry placed in memory back as unallocated (the entry dies with it)."""
        placement.unplace(self.planned)
        placement.unplace([node.ptr for node in self.outputs])
        placement.unplace([node.ptr for node in self.uploads])
        self.scratch = ()


class Trace:
    """The events of one pending graph: replaying a cached Entry (`entry`) or recording a new one."""

    __slots__ = ("cache", "entry", "pos", "depth", "cacheable", "keys", "nodes", "replays", "origins", "proxies",
                 "layouts", "proxy_of", "sources", "lowering", "backwards", "inputs_met")

    def __init__(self, cache):
        self.cache = cache        # the device's list of Entries, most recently used first
        self.entry = None
        self.pos = 0
        self.depth = 0            # > 0 inside an event: its nodes belong to it
        self.cacheable = True          # False once a node was made outside an event: not cacheable
        self.keys, self.nodes, self.replays = [], [], []
        self.origins = {}         # id(node) -> index of the event that made it (with the node's place among
        #                           several results), or a stand-in's mark
        self.proxies, self.layouts = [], []   # per slot (computed input, in order of first use): stand-ins, layout
        self.proxy_of, self.sources = {}, []  # id(computed node) -> its stand-in (or itself, pinned); the nodes
        #                                       (ids stay valid; a pinned node is kept by the graph's `keep`)
        self.inputs_met = 0              # computed inputs met (stand-ins and pinned nodes)
        self.lowering = None      # the device's Lowering when the first event recorded: builds depend on it
        self.backwards = None     # {event position: backward_replay.Record} of backward passes recorded here

    def event(self, graph, key, nodes, build, ctx=None):
        """The node of `build()` for this event (or its tuple of nodes), or the cached one when the key matches."""
        origins = self.origins
        full = (key, tuple([origins.get(id(n), n) for n in nodes]))   # an event's index, or the node itself
        pos = self.pos
        entry = self.entry
        if pos == 0 and self.lowering is None:
            self.lowering = graph.lowering
        if entry is None and pos == 0 and self.cache:
            entry = self.entry = self._candidate(full)
            if entry is not None:
                self._adopt(entry)
        if entry is not None:
            if pos < len(entry.keys) and entry.keys[pos] == full:
                node = entry.nodes[pos]
                replay = entry.replays[pos]
                if replay is not None:
                    _apply(replay, graph, ctx)
                self._made(node, pos)
                self.pos = pos + 1
                return node
            self.diverge(graph)
        marks = (len(graph.uploads), len(graph.in_place_updates), ctx._attribute_count() if ctx is not None else 0)
        self.depth += 1
        try:
            node = build()
        finally:
            self.depth -= 1
        self.keys.append(full)
        self.nodes.append(node)
        self.replays.append(_side_effects(graph, marks, ctx))
        self._made(node, pos)
        self.pos = pos + 1
        return node

    def _made(self, node, pos):
        """Note the node(s) event `pos` made: a later event's key names them by it (and their place)."""
        if node.__class__ is tuple:   # a build of several results (Primitive.multiple_results)
            for i, n in enumerate(node):
                self.origins[id(n)] = (pos, i)
        else:
            self.origins[id(node)] = pos

    def external(self, graph, t, pinned=False):
        """The node that stands for computed Tensor `t` in this trace: a leaf over t's memory, one for
        all uses of t. Events key it by its position (slot) among the trace's computed inputs and its
        layout, not by identity: replaying an entry whose computed input in that slot had the same GGML
        type and shape points the entry's stand-ins at t's memory. So a step fed other computed tensors than
        the last (a GradScaler's update reads fresh gradients every step) still replays.

        A `pinned` tensor (a Parameter, or state the step updates in place: `PendingGraph.target`) is the
        same every step: it enters as its own node, keyed by identity, with no stand-in to point at it
        on every replay (156 of them a W2 step: its parameters and AdamW's moments). The first
        use of a memory decides for all of the trace's uses of it: one node per memory."""
        g = t._node
        proxy = self.proxy_of.get(id(g))
        if proxy is not None:
            return proxy
        self.inputs_met += 1
        if pinned:
            self.proxy_of[id(g)] = g
            return g
        k = len(self.proxies)
        layout = (g.dtype, t.shape)   # the stand-in's GGML type: a Tensor's label may differ (relabel)
        entry = self.entry
        mark = ("computed", k, layout)
        origins = self.origins
        if entry is not None and k < len(entry.proxies) and entry.layouts[k] == layout:
            slot = entry.proxies[k]
            src = g.ptr
            for p in slot:
                placement.bind(p.ptr, src)
                origins[id(p)] = mark
        else:   # recording, or a layout the entry did not have here (its next key will differ)
            slot = [graph.stand_in(g)]
            origins[id(slot[0])] = mark
        self.proxies.append(slot)
        self.layouts.append(layout)
        self.sources.append(g)
        proxy = self.proxy_of[id(g)] = slot[0]
        return proxy

    def _adopt(self, entry):
        """Replaying `entry` from its first event: the computed inputs met before it (operands of the
        first op) had stand-ins of their own; the entry's, which its cached nodes read, join their slots
        and are pointed at the same memory (a slot's stand-ins are all bound together from then on)."""
        for k, g in enumerate(self.sources):
            if k < len(entry.proxies) and entry.layouts[k] == self.layouts[k]:
                mark = ("computed", k, self.layouts[k])
                for p in entry.proxies[k]:
                    placement.bind(p.ptr, g.ptr)
                    self.origins[id(p)] = mark
                self.proxies[k] = entry.proxies[k] + self.proxies[k]

    def _candidate(self, first_key):
        for entry in self.cache:   # an entry built under another lowering (execution.forced_lowering) made other nodes
            if entry.keys and entry.keys[0] == first_key and entry.lowering == self.lowering:
                return entry
        return None

    def untraced(self, graph):
        """A node is being made outside any event: stop replaying, and this trace is not cacheable."""
        if self.entry is not None:
            self.diverge(graph)
        self.cacheable = False

    def diverge(self, graph):
        """Stop replaying: the nodes replayed so far become ordinary nodes of `graph` (unallocated), the
        entry leaves the cache, and recording continues from here."""
        entry = self.entry
        self.entry = None
        if entry in self.cache:
            self.cache.remove(entry)
        entry.release()
        placement.follow_sources(entry.proxy_views)   # views of stand-ins into their memory of this step
        graph.adopt_contexts(entry.contexts)
        pos = self.pos
        self.keys, self.nodes, self.replays = entry.keys[:pos], entry.nodes[:pos], entry.replays[:pos]
        self.backwards = {start: r for start, r in (entry.backwards or {}).items() if r.end <= pos} or None


def _side_effects(graph, marks, ctx):
    """What an event did besides making nodes, to do again when it is replayed: uploads of constants,
    in-place effects, and attributes it set on the Function's ctx for backward.

    A build only adds attributes to ctx (the engine's own, set before it, are not the build's to change):
    ctx gives those set after the count it held before (FunctionCtx._attributes_after). No snapshot of ctx
    per event, and none to compare for the builds that set nothing."""
    uploads = tuple(graph.uploads[marks[0]:]) if len(graph.uploads) > marks[0] else ()
    effects = tuple(graph.in_place_updates[marks[1]:]) if len(graph.in_place_updates) > marks[1] else ()
    attrs = ctx._attributes_after(marks[2]) if ctx is not None else None
    if not uploads and not effects and not attrs:
        return None
    return (uploads, effects, attrs)


def _apply(replay, graph, ctx):
    uploads, effects, attrs = replay
    graph.redo(uploads, effects)
    if attrs:
        ctx._restore(attrs)


def remember(cache, trace, pending, graph, outputs, view_conts, scratch, planned, buffers):
    """Keep the trace just computed as an Entry (most recently used first, at most MAX_ENTRIES)."""
    entry = Entry()
    entry.keys, entry.nodes, entry.replays = trace.keys, trace.nodes, trace.replays
    entry.contexts = list(pending.contexts)
    entry.graph = graph
    entry.outputs = outputs
    entry.buffers = buffers   # each output's buffer at the last compute (execution._reuse)
    entry.sizes = None        # and the bytes each needs, once _reuse asks
    entry.rehomed = {}          # each output's re-homed metadata of the last replay (execution._finish)
    entry.in_place_updates = [id(e) for e in pending.in_place_updates]
    entry.view_conts = view_conts
    entry.uploads = [u[0] for u in pending.uploads]
    entry.scratch = scratch
    entry.planned = planned
    entry.externals = [k for key in trace.keys for k in key[1] if k.__class__ is not int]   # keeps their ids
    entry.output_views = placement.views_of(planned, [node.ptr for node in outputs])
    entry.proxies, entry.layouts = trace.proxies, trace.layouts
    entry.lowering = trace.lowering
    entry.backwards = trace.backwards
    entry.proxy_views = placement.views_of_chain(entry.contexts, [p.ptr for slot in trace.proxies for p in slot])
    cache.insert(0, entry)
    del cache[MAX_ENTRIES:]
    return entry
