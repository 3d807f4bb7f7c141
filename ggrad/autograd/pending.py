"""The pending graph of a device: GGML nodes that ops have added and no compute has run yet.

Ops build nodes into the PendingGraph of their inputs' device and get Tensors back at once; a read,
`optimizer.step()` or `ggrad.realize()` computes the whole pending graph (see execution.py).

Shapes: a Tensor's `shape` is numpy order (any rank); GGML's `ne` is the reverse, padded with 1s, with the
leading dimensions of a shape of more than 4 merged (folding.py). `ne_of` is the one place where one becomes
the other.
"""

import weakref


from .. import ggml
from ..ggml import placement
from . import lowering, trace_cache

_CONTEXT_TENSORS = 16384   # tensors per context; a pending graph chains more contexts when needed
_PRUNE_BYTES = 64 << 20    # host bytes of uploads added between two looks for ones nothing reads


def ne_of(shape):
    """GGML `ne` (4 values, innermost first) of a numpy-order shape; the dimensions before the last three of a
    shape of more than 4 share the outermost (the folded layout of folding.py)."""
    if len(shape) > 4:
        lead = 1
        for n in shape[:-3]:
            lead *= int(n)
        return [int(shape[-1]), int(shape[-2]), int(shape[-3]), lead]
    ne = [1, 1, 1, 1]
    for i, n in enumerate(reversed(shape)):
        ne[i] = int(n)
    return ne


class PendingGraph:
    """The trace of one device not computed yet: its nodes, the Tensors made from them, host uploads,
    in-place effects, and the memory of computed inputs that must live until the compute reads it."""

    __slots__ = ("computed", "device", "contexts", "_ctx", "_until_check", "tensors", "uploads", "_unread",
                 "in_place_updates", "kept_inputs", "checks", "trace", "_filled_nodes", "_upload_bytes", "_prune_at",
                 "_lowering", "result_order")

    def __init__(self, device, cache=None):
        self.device = device
        self.computed = False   # computed once already (an op of several results emitted under GGRAD_EAGER)
        self.contexts = []
        self.tensors = []   # weakrefs to the Tensors made from this graph, in creation order
        self.result_order = {}   # node pointer -> its place in the order the program made the Tensors (`ready_at`)
        self.uploads = []   # (GTensor, numpy bytes) written once the graph is allocated
        self._unread = {}   # id(GTensor) -> weakref to its Tensor: uploads of a Tensor that no node has read yet
        self._upload_bytes = 0            # bytes in `uploads`
        self._prune_at = _PRUNE_BYTES     # drop the uploads nothing can read when `_upload_bytes` reaches it
        self.in_place_updates = []   # GTensors computed for their side effect (in-place optimizer updates)
        self.kept_inputs = []   # (Block, GTensor) of computed inputs, alive until the compute has read them
        self.checks = []    # (count Tensor, error): the compute fails with `error` when a count is nonzero
        # the events recorded so far, against the device's graph cache (None: the cache is off)
        self.trace = trace_cache.Trace(cache) if cache is not None and trace_cache.ENABLED else None
        self._filled_nodes = {}   # (n, value[, dtype]) -> an [n] node of value made while building this graph
        self._lowering = None
        self._new_context()

    def _new_context(self):
        self._ctx = ggml.Context(n_tensors=_CONTEXT_TENSORS)
        self._until_check = 0
        self.contexts.append(self._ctx)

    @property
    def ctx(self):
        """The GGML context to build the next node in (a fresh one when the current is nearly full).

        Its fill is read every 8th time: a builder makes at most a few tensors per call, far below the
        room of 64 tensors kept free. Outside an event it ends the replay of a cached trace."""
        trace = self.trace
        if trace is not None and not trace.depth:
            trace.untraced(self)
        return self._context()

    def _context(self):
        self._until_check -= 1
        if self._until_check < 0:
            c = self._ctx
            if c.used_mem + 64 * ggml.tensor_overhead() > c.mem_size:
                self._new_context()
            self._until_check = 8
        return self._ctx

    @property
    def lowering(self):
        """The device's Lowering (lowering.py), looked up once: the first use decides it for every node of
        this graph (a graph built half under `execution.forced_lowering` would not be the graph of either)."""
        if self._lowering is None:
            self._lowering = lowering.for_device(self.device)
        return self._lowering

    def n_tensors(self):
        return sum(c.used_mem for c in self.contexts) // ggml.tensor_overhead() + 1

    def event(self, key, nodes, build, ctx=None):
        """`build()`, the GGML node of one event of the trace (see trace_cache.py): `key` holds what else
        than the input `nodes` decides the result; `ctx` is the Function's ctx that build may set."""
        trace = self.trace
        if trace is None or trace.depth:
            return build()
        return trace.event(self, key, nodes, build, ctx)

    def is_empty(self):
        return not self.tensors and not self.in_place_updates

    # ---- inputs ----------------------------------------------------------------------------------
    def node(self, t, pinned=False):
        """The GGML node of Tensor `t` as an input of a new node here (strides as they are).

        A computed input's memory (its Block) and metadata stay alive until this graph is computed,
        even if Python drops the tensor meanwhile. While the graph cache records or replays, a computed
        input enters as a stand-in leaf over its memory (`Trace.external`), so that the next step may
        feed other tensors of the same layout (fresh gradients) to the same cached graph. A read of host
        data is noted: it is uploaded even if its Tensor is dropped before the compute (`needed_uploads`).
        """
        if t._block is not None:
            self.kept_inputs.append((t._block, t._node))
            trace = self.trace
            if trace is not None and not t._node.is_view:
                return trace.external(self, t, pinned or t._pinned)
            return t._node
        g = t._node
        if self._unread and id(g) in self._unread:   # host data is read: it must be uploaded
            del self._unread[id(g)]
        return g

    def target(self, t):
        """The node of Tensor `t` as the target of an optimizer's in-place update (a parameter, its moments,
        a momentum buffer): such state is the same tensor every step, so while the graph cache records or
        replays it enters as itself, keyed by identity, not as a stand-in (`Trace.external`). (A KV cache
        written in place is not: each `generate` call makes a new one of the same layout.)"""
        return self.node(t, True)

    def stand_in(self, g):
        """A new leaf of `g`'s type and dimensions over `g`'s memory (for the graph cache)."""
        proxy = self._context().like(g)
        placement.bind(proxy.ptr, g.ptr)
        return proxy

    def contiguous(self, t):
        """`t`'s node with canonical strides: itself, a reshape view of a contiguous view whose size-1
        dimensions have other strides, or a contiguous copy of a strided view."""
        g = self.node(t)
        if g.is_packed:
            return g
        return self.event(_CONTIGUOUS, (g,), lambda: copy_node(self, g))

    def ones(self, n, dtype=ggml.f32):
        """An f32 [n] node of ones (or of `dtype`: a cast of it), made once per length and dtype while this
        graph is built, for the builders that sum rows or columns or write out columns with it (lowering.py).
        A replayed graph has its own already; a build after the replay diverged makes another."""
        node = self._filled(n, 1.0)
        if dtype is not ggml.f32:
            cast = self._filled_nodes.get((n, 1.0, dtype))
            if cast is None:
                cast = self._filled_nodes[(n, 1.0, dtype)] = ggml.ops.cast(self.ctx, node, dtype)
            node = cast
        return node

    def zeros(self, n):
        """An f32 [n] node of zeros, made as `ones` is (a product with it reads which elements are finite)."""
        return self._filled(n, 0.0)

    def _filled(self, n, value):
        """An f32 [n] node of `value` (arange scaled by 0 plus it: exact), one per (length, value)."""
        node = self._filled_nodes.get((n, value))
        if node is None:
            c = self.ctx
            node = ggml.ops.scale_bias(c, ggml.ops.arange(c, 0.0, float(n), 1.0), 0.0, value)
            self._filled_nodes[(n, value)] = node
        return node

    def new_leaf(self, dtype, ne):
        """A new leaf node of `dtype` and GGML dimensions `ne` (for host data: `upload` it)."""
        return self.event((_LEAF, dtype, tuple(ne)), (), lambda: self.ctx.new_tensor(dtype, ne))

    def shape_only(self, shape, dtype=ggml.f32):
        """A metadata-only node whose shape GGML reads (repeat_back, get_rows_back); never computed."""
        return self.ctx.new_tensor(dtype, ne_of(shape))

    # ---- outputs ---------------------------------------------------------------------------------
    def track(self, t):
        """Register Tensor `t` as backed by a node of this graph (it is kept if Python still holds it)."""
        self.tensors.append(weakref.ref(t))

    def add_result(self, node):
        """Note `node`, a new result of an op, in the order the program made results (`ready_at`)."""
        made = self.result_order
        made.setdefault(node.ptr, len(made))

    def ready_at(self, node):
        """The place in the program's order by which everything `node` computes from was made: the latest
        of its sources' (through the nodes an op's build made, which have no place of their own). A result
        made after its inputs (a GradScaler's unscaled gradients, made after the whole backward) is ready
        where its inputs were."""
        return ggml.latest_source(node.ptr, self.result_order)

    def upload(self, node, raw, owner=None):
        """Write host bytes `raw` into the leaf `node` before the compute. `owner`, the Tensor of `node`
        if any, is held weakly: once it is gone, if no node read `node` (`node()` notes each read) and
        no other Tensor holds it, the bytes are dropped (a loop that makes batches and never uses them
        stays bounded) and nothing is uploaded."""
        self.uploads.append((node, raw))
        if owner is not None:
            self._unread[id(node)] = weakref.ref(owner)
        self._upload_bytes += raw.nbytes
        if self._upload_bytes >= self._prune_at:
            self._prune_uploads()

    def _prune_uploads(self):
        """Drop the uploads nothing needs (`needed_uploads` of the Tensors alive now); the next prune
        waits for _PRUNE_BYTES more. Not inside an event: the graph cache takes the event's uploads as
        the list's tail from where the event began."""
        trace = self.trace
        if trace is not None and trace.depth:
            return
        self.uploads = self.needed_uploads(ref() for ref in self.tensors)
        self._upload_bytes = sum(u[1].nbytes for u in self.uploads)
        self._prune_at = self._upload_bytes + _PRUNE_BYTES

    def keep_needed_uploads(self, alive):
        """Before a compute holding the Tensors `alive`: keep only the uploads it needs (needed_uploads)."""
        self.uploads = self.needed_uploads(alive)

    def needed_uploads(self, alive):
        """The uploads a compute of this graph holding the Tensors `alive` (an iterable; None entries are
        skipped) needs: all but those that no node read, whose Tensor is gone and whose node no Tensor
        of `alive` holds (an alias, a detach)."""
        unread = self._unread
        dead = {key for key, ref in unread.items() if ref() is None}
        if not dead:
            return self.uploads
        for t in alive:
            if t is not None:
                dead.discard(id(t._node))
        for key in dead:
            del unread[key]
        return [u for u in self.uploads if id(u[0]) not in dead]

    def host_value(self, t):
        """The values of `t` when they are host data this graph has yet to upload (else None)."""
        raw = self.host_bytes(t)
        return None if raw is None else ggml.decode(raw.tobytes(), t.dtype, t.shape)

    def host_bytes(self, t):
        """The GGML-layout bytes (uint8) of `t` when they are host data this graph has yet to upload."""
        for node, raw in self.uploads:
            if node is t._node:
                return raw
        return None

    def check(self, count, error):
        """Fail the compute of this graph with `error` when the 0-d Tensor `count` is nonzero: how values
        computed on the device (indices, labels) are validated without a host round trip per op."""
        self.checks.append((count, error))

    def update_in_place(self, node):
        """Compute `node` for its side effect (an in-place update) even though no Tensor holds it."""
        self.in_place_updates.append(node)

    def drop_updates_after(self, count):
        """Forget the in-place updates scheduled after the first `count` (a step interrupted half-way)."""
        del self.in_place_updates[count:]

    # ---- what a compute does to the graph ----------------------------------------------------------
    def detach_trace(self):
        """The graph cache's trace of this graph, which nodes made from here on (the compute's own) leave."""
        trace, self.trace = self.trace, None
        return trace

    def finish(self):
        """After a compute: the graph is computed, its lists are emptied; returns its checks (`check`)."""
        checks = self.checks
        self.computed = True
        self.tensors, self.in_place_updates, self.uploads, self.kept_inputs, self.checks = [], [], [], [], []
        return checks

    # ---- what the trace cache and the backward replay read and do again --------------------------------
    def marks(self):
        """Where the graph's uploads, in-place updates and results stand now (`since` reads past them)."""
        return len(self.uploads), len(self.in_place_updates), len(self.result_order)

    def since(self, marks, results=False):
        """The uploads and in-place updates added after `marks` (tuples), and with `results` the pointers of
        the results made since (a walk over all results: once a backward pass, not once an op)."""
        uploads, updates, made = marks
        added = tuple(self.uploads[uploads:]), tuple(self.in_place_updates[updates:])
        return added + (tuple(list(self.result_order)[made:]),) if results else added

    def redo(self, uploads, updates, results=()):
        """Do again what a replayed event or backward pass did when it was recorded: its uploads, its
        in-place updates and its results' places in the program's order."""
        self.uploads.extend(uploads)
        self.in_place_updates.extend(updates)
        made = self.result_order
        for ptr in results:
            made.setdefault(ptr, len(made))

    def adopt_contexts(self, contexts):
        """Hold, first, the GGML contexts of a trace given up mid-replay (its nodes become this graph's)."""
        self.contexts[:0] = contexts


_CONTIGUOUS = ("contiguous",)
_LEAF = "leaf"


def contiguous_node(ctx, g, transpose_by_concat=False):
    """`g` with canonical strides: a reshape view where it is contiguous already, else a copy (of a
    transposed view by `transposed_copy` where `transpose_by_concat`: the backend's choice, lowering.py)."""
    if g.is_contiguous and not g.is_transposed:
        return ggml.ops.reshape_4d(ctx, g, *g.ne)
    if transpose_by_concat and _transposed(g):
        return transposed_copy(ctx, g)
    return ggml.ops.cont(ctx, g)


@lowering.choice("transpose_copy")
def copy_node(graph, g):
    """`g` with canonical strides (contiguous_node), a transposed view copied by GGML's cont or, where the
    lowering says so, by `transposed_copy`."""
    return contiguous_node(graph.ctx, g)


@copy_node.alternative("concat")
def _copy_node_by_concat(graph, g):
    return contiguous_node(graph.ctx, g, transpose_by_concat=True)


_TYPED_CONCAT = (ggml.f32, ggml.f16)   # the types GGML's CPU concat copies as typed elements


def _transposed(g):
    """Whether `g` is a transposed view: dimension 1 of unit stride, dimension 0 strided."""
    return g.dtype in _TYPED_CONCAT and g.ne[0] > 1 and g.nb[1] == g.dtype.type_size < g.nb[0]


def transposed_copy(ctx, g):
    """A contiguous copy of the transposed view `g`, as GGML's concat of g's two halves along dimension 0.

    On the CPU, cont copies such a view element by element through a memcpy call each; concat assigns
    typed elements (a [1024, 512] f32 transpose: 2.2 ms vs 1.0 ms at one thread). Concat shares its work
    among threads by dimension 2, so a 2-D `g` is also cut into 4 slabs along dimension 1 (which then
    lies in dimension 2 of the halves, and the result's memory is that of a [ne0, ne1] tensor)."""
    ne0, ne1, ne2, ne3 = g.ne
    step = g.nb[0]                          # bytes from one element of dimension 0 to the next
    rows = ggml.ops.transpose(ctx, g)       # the same memory with contiguous rows: views of it take offsets
    slabs = 4 if ne2 == ne3 == 1 and ne1 % 4 == 0 else 1
    half = ne0 // 2
    halves = []
    for start, n in ((0, half), (half, ne0 - half)):
        if slabs > 1:
            width = ne1 // slabs
            part = ggml.ops.view_4d(ctx, rows, width, slabs, n, 1, width * g.dtype.type_size, step, step * n,
                                    start * step)
            halves.append(ggml.ops.permute(ctx, part, 1, 2, 0, 3))    # (n, width, slabs)
        else:
            part = ggml.ops.view_4d(ctx, rows, ne1, n, ne2, ne3, rows.nb[1], rows.nb[2], rows.nb[3], start * step)
            halves.append(ggml.ops.transpose(ctx, part))              # (n, ne1, ne2, ne3)
    return ggml.ops.reshape_4d(ctx, ggml.ops.concat(ctx, halves[0], halves[1], 0), ne0, ne1, ne2, ne3)
