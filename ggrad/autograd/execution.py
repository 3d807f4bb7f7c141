"""Deferred execution: `realize()` computes a device's PendingGraph as ONE GGML graph.

Every op returns a Tensor at once, backed by a node in its device's pending graph (pending.py). A read,
an optimizer step or `realize()` computes it: the tensors Python still holds become persistent, placed by
GGML's allocator in the compute buffer where the graph makes them (moved into a pooled buffer of their own
before the next compute, if still held); everything else is scratch that the scheduler plans and reuses.
`GGRAD_EAGER=1` computes after every op.
"""

import contextlib
import os
import time

from .. import ggml
from ..ggml import placement
from . import device_locks, lowering, rollback, trace_cache, view_tracking
from .memory import Block, FailedGraph, all_runtimes, rehome, runtime, stats
from .pending import PendingGraph

EAGER = os.environ.get("GGRAD_EAGER", "") not in ("", "0")
eval_hook = None   # set by ggrad.profile(): called per computed node
_captured = None   # set by capture(): receives a Replay of each compute


def fresh_graph(device):
    """Compute `device`'s pending work and start its next graph afresh, one whose lowering is not yet fixed
    (forced_lowering: every graph is built under one lowering)."""
    with device_locks.lock_of(device):
        rt = runtime(device)
        _realize(rt.graph, None)
        if rt.graph.is_empty():   # no Tensor refers to it: a stale lowering goes with it
            rt.graph = PendingGraph(device, rt.cache)


@contextlib.contextmanager
def forced_lowering(device, choices):
    """Within the block, graphs on `device` are lowered as `lowering` says. The device's pending work is
    computed on entry and on exit: a graph's lowering is fixed by its first use, so a graph begun outside
    the block would otherwise be built half under other choices."""
    fresh_graph(device)
    previous = lowering.forced_choices(device)
    lowering.force(device, choices)
    try:
        yield
    finally:
        try:
            fresh_graph(device)
        finally:
            lowering.force(device, previous)


def realize(target=None, eval_callback=None):
    """Compute now: everything pending (`target` None), on one device, or one PendingGraph (the current
    one of its device, or one an interrupted op left behind). Held tensors become persistent."""
    if target is None:
        for rt in all_runtimes():
            realize(rt.graph, eval_callback)
        return
    if isinstance(target, FailedGraph):
        raise target.error
    device = target.device if isinstance(target, PendingGraph) else ggml.device(target)
    with device_locks.lock_of(device):
        _realize(target, eval_callback)


def _realize(target, eval_callback):
    graph = target if isinstance(target, PendingGraph) else runtime(ggml.device(target)).graph
    rt = runtime(graph.device)
    if graph.is_empty():
        return
    current = rt.graph is graph
    if current:
        rt.graph = PendingGraph(graph.device, rt.cache)
    alive, across, seen = [], [], set()
    for ref in graph.tensors:
        t = ref()
        if t is not None and t._pending is graph and id(t) not in seen:
            seen.add(id(t))
            if t._view_of is not None and view_tracking.blocks_across(t):
                across.append(t)
            else:
                alive.append(t)
    if alive or graph.in_place_updates:
        _compute(rt, graph, alive, eval_callback, current)
    for t in across:   # not held as a copy: derived again from its base, which its view record holds
        view_tracking.rederive(t)


def _compute(rt, pending, alive, eval_callback, current):
    """Compute `pending` holding the Tensors `alive`: replay its cached entry or plan it, run it, finish. A
    failure before the finish rolls everything back (rollback.py); `current`: `pending` was the device's
    pending graph, and is again after a failure."""
    ggml.check_device(rt.device)   # a lost RPC server: fail before planning (the compute checks again)
    rt.evacuate(pending)
    trace = pending.detach_trace()
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
        _finish(rt, pending, entry.graph, alive, blocks, entry.rehomed)
        _note_capture(entry, True, alive)
        return
    blocks, planned, view_conts, moved = plan[3:]
    if trace is not None:
        stats.cache_misses += 1
        rt.planned_for = None
        if trace.cacheable and not moved and sched.n_splits <= 1:
            outputs = list({id(t._node): t._node for t in alive}.values())
            rt.planned_for = trace_cache.remember(rt.cache, trace, pending, graph, outputs, view_conts, scratch,
                                                  planned, [blocks.get(node.ptr) for node in outputs])
    else:
        rt.planned_for = None
    _finish(rt, pending, graph, alive, blocks)
    _note_capture(rt.planned_for, False, alive)


def _note_capture(entry, hit, alive):
    """Complete the Replay `capture` took of this compute: the cached entry it computed (None where the
    trace was not cached), whether that was a replay of it, and the memory of the host data it held."""
    if _captured:
        replay = _captured[-1]
        replay.entry, replay.hit = entry, hit
        replay.held_leaves = [t._block for t in alive if t._block is not None and t._block.pool is not None]


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
    pending.keep_needed_uploads(alive)
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
            t._held_as(view_conts.get(id(view)) or ggml.ops.cont(pending.ctx, view))
            view_conts[id(view)] = t._node
    moved = _route_unsupported(rt.device, pending, alive) if not rt.device.is_cpu else False
    if pending.computed:   # computed before: its nodes hold addresses of that plan, which is not this one's
        placement.unplace(placement.computed(pending.contexts))
    graph = ggml.Graph(pending.n_tensors() + len(pending.kept_inputs) + len(pending.in_place_updates) + 64)
    # GGML computes the nodes in the order they are added. Held results added by when their inputs were
    # made are computed as soon as the program could have: a layer's weight gradients right after its
    # backward, not after the whole backward, so the activation gradients they read are freed early (a
    # GradScaler's unscaled gradients, made after the backward, otherwise held every layer's to the end)
    for t in sorted(alive, key=lambda t: pending.ready_at(t._node)):
        t._node.set_output()   # held: GGML must write it (and not fuse it away into its consumer)
        graph.expand(t._node)
    for e in pending.in_place_updates:
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
    pending.keep_needed_uploads(alive)
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
    if [id(e) for e in pending.in_place_updates] != entry.in_place_updates:
        return None
    for t in alive:
        if t._node.is_view:
            t._held_as(entry.view_conts[id(t._node)])
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
    rt.peak = max(rt.peak, rt.pool.in_use + sched.buffer_size() + rt.replay_buffer_bytes())   # held results placed
    for node, raw in pending.uploads:
        node.write(raw)
        stats.bytes_uploaded += raw.nbytes
    if graph.n_nodes:   # a graph of uploads only has nothing to compute (RPC rejects empty graphs)
        start = time.perf_counter()
        sched.compute(graph, eval_callback or eval_hook)
        stats.compute_seconds += time.perf_counter() - start
    if _captured is not None:
        _captured.append(Replay(sched, graph, pending, scratch))


def _finish(rt, pending, graph, alive, blocks, rehomed=None):
    """Count the compute, give the held tensors their memory (memory.rehome), run the graph's checks."""
    stats.computes += 1
    stats.nodes += graph.n_nodes

    computed = [t for t in alive if not t._node.is_leaf] if pending.checks else ()   # host data stays valid
    stats.persisted += rehome(rt, alive, blocks, rehomed)
    checks = pending.finish()
    for count, error in checks:
        if ggml.get_data(count._node, (1,))[0] != 0:
            failed = FailedGraph(error)
            for t in computed:
                t._failed(failed)
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
        t._held_as(moved[key])
    for e in pending.in_place_updates:
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
        self.kept = [block for block, _ in pending.kept_inputs]   # memory of the computed tensors it reads
        self.checks = [(count._node, error) for count, error in pending.checks]   # (graph node, error)
        self.entry, self.hit, self.held_leaves = None, False, []   # set once the compute finished
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
        for rt in all_runtimes():
            with rt.lock:
                rt.cache.clear()
                rt.planned_for = None
