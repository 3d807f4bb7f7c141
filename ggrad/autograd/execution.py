"""Deferred execution: `realize()` computes a device's PendingGraph as ONE GGML graph.

Every op returns a Tensor at once, backed by a node in its device's pending graph (pending.py). A read,
an optimizer step or `realize()` computes it: the tensors Python still holds become persistent, placed by
GGML's allocator in the compute buffer where the graph makes them (moved into a pooled buffer of their own
before the next compute, if still held); everything else is scratch that the scheduler plans and reuses.
`GGRAD_EAGER=1` computes after every op.
"""

import os
import threading
import time
import weakref

from .. import ggml
from ..ggml import placement
from . import pending as _pending  # a module reference: pending.py imports this module
from . import rollback, trace_cache, view_tracking

EAGER = os.environ.get("GGRAD_EAGER", "") not in ("", "0")
_POOL_BYTES = 1 << 30           # freed buffers kept for reuse, per device


class Stats:
    """Public counters: graph computes, nodes computed, bytes moved. `ggrad.stats()` returns them."""

    __slots__ = ("computes", "nodes", "bytes_uploaded", "bytes_read", "host_reads", "persisted", "cache_hits",
                 "cache_misses", "backward_replays", "step_replays", "compute_seconds")

    def __init__(self):
        self.reset()

    def reset(self):
        self.reset_peaks()
        self.computes = self.nodes = self.bytes_uploaded = self.bytes_read = self.host_reads = self.persisted = 0
        self.cache_hits = self.cache_misses = self.backward_replays = self.step_replays = 0
        self.compute_seconds = 0.0   # wall time inside GGML's graph compute (the rest of a step is host work)

    def as_dict(self):
        out = {k: getattr(self, k) for k in self.__slots__}
        out["memory"] = {name: rt.memory() for name, rt in list(_runtimes.items())}
        return out

    def reset_peaks(self):
        for rt in list(_runtimes.values()):
            rt.peak = rt.pool.in_use + rt.compute_buffer_bytes()

    def __repr__(self):
        return f"Stats({self.as_dict()})"


_runtimes = {}   # device name -> Runtime
stats = Stats()
_runtimes_lock = threading.Lock()
eval_hook = None   # set by ggrad.profile(): called per computed node
_captured = None   # set by capture(): receives a Replay of each compute


class BufferPool:
    """Freed per-tensor buffers of one device, kept by size so that steady training allocates nothing.

    The buffers are unmanaged (freed here, never by cffi's garbage hooks): a Block dying inside a
    reference cycle must not hand back memory that the collector already freed. A Block dies in whichever
    thread drops it last, while another computes on the device (dp_train's threads): the lock keeps the
    counts and the free lists whole; it is re-entrant so that a Block the collector frees while its own
    thread holds the lock cannot deadlock that thread.
    """

    def __init__(self, device):
        self.device = device
        self.free = {}
        self.bytes = 0       # in free buffers kept for reuse
        self.in_use = 0      # in buffers handed out: every computed tensor still held, and cached uploads
        self.limit = _POOL_BYTES   # kept here: a Block may die at interpreter exit, after the module's globals
        self.lock = threading.RLock()

    def take(self, size, prefer=None):
        """A buffer of `size` bytes: `prefer` where it is free (the same memory as before), else any free one,
        else a new one."""
        with self.lock:
            bucket = self.free.get(size)
            if bucket:
                self.bytes -= size
                self.in_use += size
                if prefer is not None and bucket[-1] is not prefer:
                    for i, buffer in enumerate(bucket):
                        if buffer is prefer:
                            bucket[i] = bucket[-1]
                            bucket[-1] = prefer
                            break
                return bucket.pop()
        buffer = ggml.Buffer(self.device.buffer_type, size, managed=False)   # outside: RPC allocates remotely
        with self.lock:
            self.in_use += buffer.size
        return buffer

    def give(self, buffer):
        with self.lock:
            self.in_use -= buffer.size
            if self.bytes + buffer.size > self.limit:
                buffer.free()
                return
            self.free.setdefault(buffer.size, []).append(buffer)
            self.bytes += buffer.size

    def clear(self):
        """Free every buffer kept for reuse (those handed out stay theirs)."""
        with self.lock:
            for bucket in self.free.values():
                for buffer in bucket:
                    buffer.free()
            self.free.clear()
            self.bytes = 0


class Block:
    """The memory of one realized tensor; returns its buffer to the pool when the last user lets go.

    A result of the last compute lives in the scheduler's compute buffer, where GGML's allocator put it
    (buffer and pool None, `node` its metadata): the next compute on the device moves it into a pooled
    buffer first if anybody still holds it (`Runtime.evacuate`)."""

    __slots__ = ("buffer", "pool", "node", "__weakref__")

    def __init__(self, buffer, pool, node=None):
        self.buffer = buffer
        self.pool = pool
        self.node = node

    def __del__(self):
        pool = self.pool
        if pool is not None:
            pool.give(self.buffer)


class FailedGraph:
    """Where the results of a graph whose checks failed point: reading or using one raises the error again
    (their values were computed from clamped indices and mean nothing). Host data in it stays valid."""

    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error

    def track(self, t):
        """A new Tensor on a failed result's node (a relabel, a view) fails as using the result does."""
        raise self.error


class Runtime:
    """Per-device state: the current pending graph, the scheduler and the buffer pool."""

    def __init__(self, device):
        self.device = device
        # Recording into and computing this device's pending graph hold this lock: ops of several
        # threads interleave into the one pending graph and a compute takes it whole, so no thread sees a
        # half-built graph and the device's scheduler and thread pool are never entered twice at once.
        # Devices have a lock each, so their graphs still compute at the same time (dp_train).
        self.lock = threading.RLock()
        self.cache = []            # trace_cache Entries of this device, most recently used first
        self.planned_for = None    # the Entry whose graph the scheduler's memory is laid out for
        self.graph = _pending.PendingGraph(device, self.cache)
        self.scheduler = None
        self.pool = BufferPool(device)
        self.peak = 0              # the most device memory a compute has used (see memory())
        self.held = []             # weak references to the Blocks of the last compute's results that live
        #                            in the compute buffer (Block)
        # GGML's RPC client sends GRAPH_RECOMPUTE for a scheduler split whose uid is unchanged, and the
        # server then runs its stored copy with the tensor addresses of last time; a replayed entry's inputs
        # and held host data may have other buffers. Planning again gives the splits new uids: the graph is
        # sent again.
        self.resends_graphs = device.backend_name == "RPC"

    def compute_buffer_bytes(self):
        return self.scheduler.buffer_size() if self.scheduler is not None else 0

    def memory(self):
        """Device memory in bytes: the scheduler's compute buffer (intermediates of a step), persistent
        tensors (every tensor held: parameters, optimizer state, gradients, held results, cached uploads;
        `in_compute_buffer` of them are results of the last compute still where it made them), free
        buffers kept for reuse, and the peak of compute buffer + pooled tensors over the computes since
        `ggrad.reset_stats()` (as `torch.cuda.max_memory_allocated`, free cached memory is not counted)."""
        held = 0
        for ref in self.held:
            block = ref()
            if block is not None and block.pool is None:
                held += block.node.nbytes
        return {"compute_buffer": self.compute_buffer_bytes(), "persistent": self.pool.in_use + held,
                "in_compute_buffer": held, "pooled": self.pool.bytes,
                "peak": max(self.peak, self.pool.in_use + self.compute_buffer_bytes())}

    def evacuate(self, pending):
        """Before a compute overwrites the compute buffer: move the results of the last compute that are
        still held (by a Tensor, or read by `pending`) into pooled buffers of their own, and point what
        `pending` built on their old memory (views, the graph cache's stand-ins) at the new."""
        held, self.held = self.held, []
        moved = set()
        home = None
        for ref in held:
            block = ref()
            if block is None or block.pool is not None:
                continue
            node = block.node
            buffer = self.pool.take(ggml.alloc_size(self.device.buffer_type, node))
            if home is None:
                home = ggml.Context(n_tensors=len(held))
            copy = home.like(node)
            buffer.place(copy)
            ggml.copy_tensor(node, copy)
            placement.bind(node.ptr, copy.ptr)
            block.buffer, block.pool, block.node = buffer, self.pool, None
            moved.add(node.ptr)
        if not moved:
            return
        trace = pending.trace
        if trace is not None:   # stand-ins were bound to the old memory while the step recorded (views of
            for g, slot in zip(trace.sources, trace.proxies):   # a replayed entry's follow them in _reuse)
                if g.ptr in moved:
                    for proxy in slot:
                        placement.bind(proxy.ptr, g.ptr)
                        moved.add(proxy.ptr)
        placement.follow_sources(placement.views_of_chain(pending.contexts, moved))

    def scheduler_for(self, graph_size):
        if self.scheduler is None or self.scheduler.graph_size < graph_size:
            size = max(graph_size, 2 * (self.scheduler.graph_size if self.scheduler else 2048))
            self.scheduler = ggml.Scheduler(self.device, size)
        return self.scheduler


def runtime(device):
    rt = _runtimes.get(device.name)
    if rt is None:
        with _runtimes_lock:
            rt = _runtimes.get(device.name) or Runtime(device)
            _runtimes[device.name] = rt
    return rt


def lock_of(device):
    """The lock to hold while recording into or computing `device`'s pending graph (see Runtime)."""
    return runtime(device).lock


def pending_graph(device):
    """The graph that new ops on `device` add their nodes to."""
    return runtime(device).graph


def fresh_graph(device):
    """Compute `device`'s pending work and start its next graph afresh, one whose lowering is not yet fixed
    (lowering.forced: every graph is built under one lowering)."""
    with lock_of(device):
        rt = runtime(device)
        _realize(rt.graph, None)
        if rt.graph.is_empty():   # no Tensor refers to it: a stale lowering goes with it
            rt.graph = _pending.PendingGraph(device, rt.cache)


def realize(target=None, eval_callback=None):
    """Compute now: everything pending (`target` None), on one device, or one PendingGraph (the current
    one of its device, or one an interrupted op left behind). Held tensors become persistent."""
    if target is None:
        for rt in list(_runtimes.values()):
            realize(rt.graph, eval_callback)
        return
    if isinstance(target, FailedGraph):
        raise target.error
    device = target.device if isinstance(target, _pending.PendingGraph) else ggml.device(target)
    with lock_of(device):
        _realize(target, eval_callback)


def _realize(target, eval_callback):
    graph = target if isinstance(target, _pending.PendingGraph) else pending_graph(ggml.device(target))
    rt = runtime(graph.device)
    if graph.is_empty():
        return
    current = rt.graph is graph
    if current:
        rt.graph = _pending.PendingGraph(graph.device, rt.cache)
    alive, across, seen = [], [], set()
    for ref in graph.tensors:
        t = ref()
        if t is not None and t._pending is graph and id(t) not in seen:
            seen.add(id(t))
            if t._view_of is not None and view_tracking.blocks_across(t):
                across.append(t)
            else:
                alive.append(t)
    if alive or graph.effects:
        _compute(rt, graph, alive, eval_callback, current)
    for t in across:   # not held as a copy: derived again from its base, which its view record holds
        view_tracking.rederive(t)


def _compute(rt, pending, alive, eval_callback, current):
    """Compute `pending` holding the Tensors `alive`: replay its cached entry or plan it, run it, finish. A
    failure before the finish rolls everything back (rollback.py); `current`: `pending` was the device's
    pending graph, and is again after a failure."""
    ggml.check_device(rt.device)   # a lost RPC server: fail before planning (the compute checks again)
    rt.evacuate(pending)
    trace, pending.trace = pending.trace, None   # nodes made from here on are the compute's own
    undo = rollback.Undo(rt, pending, alive, trace, current)
    try:
        replayed = _replay(rt, trace, pending, alive, eval_callback, undo)
        if replayed is None:
            plan = _plan(rt, pending, alive, trace is not None, undo)
            graph, sched, scratch = plan[:3]
            _run(rt, sched, graph, pending, scratch, eval_callback)
    except BaseException:
        undo.roll_back()
        raise
    if replayed is not None:
        stats.cache_hits += 1
        entry, blocks = replayed
        return _finish(rt, pending, entry.graph, alive, blocks, entry.homes)
    blocks, planned, view_conts, moved = plan[3:]
    if trace is not None:
        stats.cache_misses += 1
        rt.planned_for = None
        if trace.pure and not moved and sched.n_splits <= 1:
            outputs = list({id(t._node): t._node for t in alive}.values())
            rt.planned_for = trace_cache.remember(rt.cache, trace, pending, graph, outputs, view_conts, scratch,
                                                  planned, [blocks.get(node.ptr) for node in outputs])
    else:
        rt.planned_for = None
    _finish(rt, pending, graph, alive, blocks)


def _replay(rt, trace, pending, alive, eval_callback, undo):
    """Compute a replayed cached trace with its entry's graph: (entry, blocks of the held host data), or
    None where there is none to replay (the trace, if any, then continues as a recording of its own)."""
    if trace is None or trace.entry is None:
        return None
    entry = trace.entry
    blocks = _reuse(rt, entry, pending, alive, undo) if trace.pos == len(entry.keys) else None
    if blocks is None:
        trace.diverge(pending)   # a prefix of it, or other held results or updates
        return None
    pending.uploads = pending.needed_uploads(alive)
    _run(rt, rt.scheduler, entry.graph, pending, entry.scratch, eval_callback)
    return entry, blocks


def _plan(rt, pending, alive, cacheable, undo):
    """Build the GGML graph of `pending` and place it in memory: held host data and uploads in pooled
    buffers, the rest (held results included) planned by the scheduler (and listed, when `cacheable`).
    What it places is noted in `undo` (rollback.py)."""
    # A held view would point into scratch memory: give it its own contiguous copy.
    view_conts = {}
    for t in alive:
        if t._node.is_view:
            view = t._node
            t._node = view_conts.get(id(view)) or ggml.ops.cont(pending.ctx, view)
            view_conts[id(view)] = t._node
    moved = _route_unsupported(rt.device, pending, alive) if not rt.device.is_cpu else False
    if pending.computed:   # computed before: its nodes hold addresses of that plan, which is not this one's
        placement.unplace(placement.computed(pending.contexts))
    graph = ggml.Graph(pending.n_tensors() + len(pending.keep) + len(pending.effects) + 64)
    # GGML computes the nodes in the order they are added. Held results added by when their inputs were
    # made are computed as soon as the program could have: a layer's weight gradients right after its
    # backward, not after the whole backward, so the activation gradients they read are freed early (a
    # GradScaler's unscaled gradients, made after the backward, otherwise held every layer's to the end)
    for t in sorted(alive, key=lambda t: pending.ready_at(t._node)):
        t._node.set_output()   # held: GGML must write it (and not fuse it away into its consumer)
        graph.expand(t._node)
    for e in pending.effects:
        graph.expand(e)

    # Held host data gets a pooled buffer; held results are placed by GGML's allocator in the compute
    # buffer where the graph makes them (never freed within the graph: outputs), so a gradient takes the
    # memory of activations the backward is done with, as PyTorch's allocator gives it (Block).
    blocks = {}
    for t in alive:
        key = t._node.ptr
        if key not in blocks and t._node.is_leaf:
            buffer = rt.pool.take(ggml.alloc_size(rt.device.buffer_type, t._node))
            undo.place(buffer, t._node, False)
            blocks[key] = buffer
    # Host data goes straight into device memory, not into a CPU staging tensor that the scheduler
    # copies over during the compute; buffers of uploads nobody holds return to the pool after.
    # Host data that the graph does not read (a dropped batch) is neither placed nor written.
    pending.uploads = pending.needed_uploads(alive)
    scratch = []
    for node, _ in pending.uploads:
        if not node.is_allocated:
            buffer = rt.pool.take(ggml.alloc_size(rt.device.buffer_type, node))
            scratch.append(Block(buffer, rt.pool))
            undo.place(buffer, node, True)
    unplaced = placement.unplaced(pending.contexts)
    undo.placed += unplaced
    planned = unplaced if cacheable else None
    sched = rt.scheduler_for(graph.size)
    sched.alloc(graph)
    if planned is not None:
        planned = placement.placed(planned)
    return graph, sched, scratch, blocks, planned, view_conts, moved


def _reuse(rt, entry, pending, alive, undo):
    """Get a cached entry's graph ready to compute again (held host data in pooled buffers, held results
    where the entry's plan puts them), or None when this step holds other results or schedules other
    updates than the entry computed. The buffers it takes are noted in `undo` (rollback.py)."""
    outputs = {}
    for t in alive:
        node = t._node
        if node.is_view:
            node = entry.view_conts.get(id(node))
            if node is None:
                return None
        outputs[id(node)] = node
    if len(outputs) != len(entry.outputs) or any(id(n) not in outputs for n in entry.outputs):
        return None
    if [id(e) for e in pending.effects] != entry.effects:
        return None
    for t in alive:
        if t._node.is_view:
            t._node = entry.view_conts[id(t._node)]
    placement.follow_sources(entry.proxy_views)   # views of stand-ins into this step's inputs
    blocks = {}
    buffers = entry.buffers   # each held host datum in its memory of the last compute where that is free
    sizes = entry.sizes       # again: the graph then reads the same addresses (CUDA graphs); held results
    if sizes is None:         # are in the compute buffer, where the entry's plan put them (None here)
        sizes = entry.sizes = [ggml.alloc_size(rt.device.buffer_type, node) for node in entry.outputs]
    for i, node in enumerate(entry.outputs):
        last = buffers[i]
        if last is None:
            continue
        p = node.ptr
        buffer = buffers[i] = rt.pool.take(sizes[i], last)
        undo.taken.append(buffer)
        if buffer is not last or p.buffer != buffer.ptr:   # else it is still there, at the buffer's start
            placement.unplace((p,))
            buffer.place(node)
        blocks[p] = buffer
    if rt.planned_for is not entry or rt.scheduler is None or rt.resends_graphs:
        placement.unplace(entry.planned)
        rt.scheduler_for(entry.graph.size).alloc(entry.graph)
        rt.planned_for = entry
    else:   # views of held results follow them into their new buffers
        placement.follow_sources(entry.output_views)
    if entry in rt.cache and rt.cache[0] is not entry:
        rt.cache.remove(entry)
        rt.cache.insert(0, entry)
    return blocks


def _run(rt, sched, graph, pending, scratch, eval_callback):
    rt.peak = max(rt.peak, rt.pool.in_use + sched.buffer_size())   # held results are placed by now
    for node, raw in pending.uploads:
        node.write(raw)
        stats.bytes_uploaded += raw.nbytes
    if graph.n_nodes:   # a graph of uploads only has nothing to compute (RPC rejects empty graphs)
        start = time.perf_counter()
        sched.compute(graph, eval_callback or eval_hook)
        stats.compute_seconds += time.perf_counter() - start
    if _captured is not None:
        _captured.append(Replay(sched, graph, pending, scratch))


def _finish(rt, pending, graph, alive, blocks, homes=None):
    """Count the compute, give the held tensors their memory (re-homed), run the graph's checks.

    A held result in the compute buffer gets a Block that `Runtime.evacuate` moves before the next compute;
    held host data its pooled buffer. `homes` (a replayed Entry's) keeps, per held result, the metadata it
    was re-homed onto the last time and its Block (weakly): where that Block is gone and the metadata still
    points at this result's memory (the entry's plan places it at the same address), no tensor uses it
    any more and it is used again (a W2 step re-homes its 50 gradients every step)."""
    stats.computes += 1
    stats.nodes += graph.n_nodes
    pending.computed = True

    computed = [t for t in alive if not t._node.is_leaf] if pending.checks else ()   # host data stays valid
    # Re-home the held tensors onto metadata of their own, so the pending graph's contexts can be freed.
    home = None
    homed = {}
    held = rt.held
    for t in alive:
        key = t._node.ptr
        entry = homed.get(key)
        if entry is None:
            buffer = blocks.get(key)
            last = homes.get(key) if homes is not None else None
            if last is not None and last[1]() is None and last[0].ptr.data == key.data:
                stored = last[0]
            else:
                if home is None:
                    home = ggml.Context(n_tensors=len(alive))
                stored = home.like(t._node)
                placement.bind(stored.ptr, key)   # the node's memory (its buffer's start, or the compute buffer)
            if buffer is not None:
                block = Block(buffer, rt.pool)
            else:
                block = Block(None, None, stored)
                held.append(weakref.ref(block))
            if homes is not None:
                homes[key] = (stored, weakref.ref(block))
            entry = homed[key] = (stored, block)
        t._node, t._block = entry
        t._pending = None
    stats.persisted += len(homed)
    checks = pending.checks
    pending.tensors, pending.effects, pending.uploads, pending.keep, pending.checks = [], [], [], [], []
    for count, error in checks:
        if ggml.get_data(count._node, (1,))[0] != 0:
            failed = FailedGraph(error)
            for t in computed:
                t._pending = failed
            raise error


def _route_unsupported(device, pending, alive):
    """Held results whose op `device` cannot run are computed on the CPU fallback and copied over.

    A held tensor lives in a buffer of its device before the compute; ggml_backend_sched aborts the
    process when a pre-allocated tensor's op cannot run on the backend of its buffer. Such a result
    (cross_entropy_loss on Vulkan, out_prod of f16, ...) is left as CPU scratch and a `cont` copy, which
    every GPU backend runs, becomes the held tensor. In-place effects cannot be moved: a clear error.
    Returns whether a result was moved.
    """
    moved = {}
    for t in alive:
        g = t._node
        if g.is_leaf or device.supports_op(g):
            continue
        key = g.ptr
        if key not in moved:
            g.set_output()
            copy = ggml.ops.cont(pending.ctx, g)
            if not device.supports_op(copy):
                raise ggml.DeviceError(f"{device.name} cannot compute {g.op} ({g.dtype.name}, ne={list(g.ne)}) "
                                       f"nor copy its result into device memory")
            moved[key] = copy
        t._node = moved[key]
    for e in pending.effects:
        if not device.supports_op(e):
            raise ggml.DeviceError(f"{device.name} cannot run the in-place update {e.op} ({e.dtype.name}, "
                                   f"ne={list(e.ne)}) on tensors in its memory")
    return bool(moved)


class Replay:
    """A computed graph kept with its allocation, to compute again with the same structure.

    This is the static-graph limit that define-by-run execution is measured against
    (benchmarks/bench_overhead.py): no tracing, no planning, only the uploads and GGML's compute.
    Valid only while nothing else is computed on the device (the scheduler's memory is shared).
    """

    def __init__(self, scheduler, graph, pending, scratch):
        self.scheduler, self.graph, self.uploads = scheduler, graph, list(pending.uploads)
        self._keep = (pending, scratch)   # the graph's tensor metadata and the uploads' memory

    def run(self):
        for node, raw in self.uploads:
            node.write(raw)
        self.scheduler.compute(self.graph)


class capture:
    """`with capture() as replays:` records a Replay of every compute inside the block."""

    def __enter__(self):
        global _captured
        self.replays, _captured = [], []
        return self.replays

    def __exit__(self, *exc):
        global _captured
        self.replays.extend(_captured)
        _captured = None


def set_graph_cache(enabled):
    """Turn the graph cache (trace_cache.py) on or off; off also forgets the cached graphs."""
    trace_cache.ENABLED = bool(enabled)
    if not enabled:
        for rt in list(_runtimes.values()):
            with rt.lock:
                rt.cache.clear()
                rt.planned_for = None


def reset_pools():
    """Drop every pooled buffer (frees memory after a large job)."""
    for rt in list(_runtimes.values()):
        rt.pool.clear()
