"""Deferred execution: ops add GGML nodes to a pending Step; `realize()` computes a Step as ONE graph.

Every op returns a Tensor at once, backed by a node in its device's Step. A read, an optimizer step or
`realize()` computes the Step: the tensors Python still holds become persistent (each in a pooled
backend buffer); everything else is scratch that the scheduler plans and reuses. `GGRAD_EAGER=1`
computes after every op.
"""

import os

from .. import ggml

EAGER = os.environ.get("GGRAD_EAGER", "") not in ("", "0")
_STEP_TENSORS = 16384           # tensors per step context; a step chains more contexts when needed
_POOL_BYTES = 1 << 30           # freed buffers kept for reuse, per device


class Stats:
    """Public counters: graph computes, nodes computed, bytes moved. `ggrad.stats()` returns them."""

    __slots__ = ("computes", "nodes", "bytes_uploaded", "bytes_read", "persisted")

    def __init__(self):
        self.reset()

    def reset(self):
        self.computes = self.nodes = self.bytes_uploaded = self.bytes_read = self.persisted = 0

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self):
        return f"Stats({self.as_dict()})"


stats = Stats()
eval_hook = None   # set by ggrad.profile(): called per computed node
_captured = None   # set by capture(): receives a Replay of each compute


class BufferPool:
    """Freed per-tensor buffers of one device, kept by size so that steady training allocates nothing.

    The buffers are unmanaged (freed here, never by cffi's garbage hooks): a Block dying inside a
    reference cycle must not hand back memory that the collector already freed.
    """

    def __init__(self, device):
        self.device = device
        self.free = {}
        self.bytes = 0

    def take(self, size):
        bucket = self.free.get(size)
        if bucket:
            self.bytes -= size
            return bucket.pop()
        return ggml.Buffer(self.device.buffer_type, size, managed=False)

    def give(self, buffer):
        if self.bytes + buffer.size > _POOL_BYTES:
            buffer.free()
            return
        self.free.setdefault(buffer.size, []).append(buffer)
        self.bytes += buffer.size


class Block:
    """The memory of one realized tensor; returns its buffer to the pool when the last user lets go."""

    __slots__ = ("buffer", "pool", "__weakref__")

    def __init__(self, buffer, pool):
        self.buffer = buffer
        self.pool = pool

    def __del__(self):
        pool = self.pool
        if pool is not None:
            pool.give(self.buffer)


class Step:
    """The pending trace of one device: GGML nodes not computed yet, and the host data they read."""

    __slots__ = ("device", "contexts", "ctx", "pending", "uploads", "effects", "keep")

    def __init__(self, device):
        self.device = device
        self.contexts = []
        self.ctx = None
        self.pending = []   # weakrefs to the Tensors made in this step, in creation order
        self.uploads = []   # (GTensor, numpy bytes) written once the graph is allocated
        self.effects = []   # GTensors computed for their side effect (in-place optimizer updates)
        self.keep = []      # Blocks of realized inputs, alive until the compute has read them
        self._new_context()

    def _new_context(self):
        self.ctx = ggml.Context(n_tensors=_STEP_TENSORS)
        self.contexts.append(self.ctx)

    def context(self):
        """The context to build the next node in (a fresh one when the current is nearly full)."""
        ctx = self.ctx
        if ctx.used_mem + 64 * ggml.tensor_overhead() > ctx.mem_size:
            self._new_context()
        return self.ctx

    def n_tensors(self):
        return sum(c.used_mem for c in self.contexts) // ggml.tensor_overhead() + 1


class Runtime:
    """Per-device state: the current Step, the scheduler and the buffer pool."""

    def __init__(self, device):
        self.device = device
        self.step = Step(device)
        self.scheduler = None
        self.pool = BufferPool(device)

    def scheduler_for(self, graph_size):
        if self.scheduler is None or self.scheduler.graph_size < graph_size:
            size = max(graph_size, 2 * (self.scheduler.graph_size if self.scheduler else 2048))
            self.scheduler = ggml.Scheduler(self.device, size)
        return self.scheduler


_runtimes = {}


def runtime(device):
    rt = _runtimes.get(device.name)
    if rt is None:
        rt = _runtimes[device.name] = Runtime(device)
    return rt


def current_step(device):
    return runtime(device).step


def realize_all():
    """Compute every device's pending work."""
    for rt in list(_runtimes.values()):
        realize(rt.device)


def realize(device, eval_callback=None):
    """Compute the pending Step of `device` as one graph; held tensors become persistent."""
    realize_step(runtime(device).step, eval_callback)


def realize_step(step, eval_callback=None):
    """Compute `step` (the current one of its device, or one an interrupted op left behind)."""
    rt = runtime(step.device)
    if not step.pending and not step.effects:
        return
    if rt.step is step:
        rt.step = Step(step.device)
    alive, seen = [], set()
    for ref in step.pending:
        t = ref()
        if t is not None and t._step is step and id(t) not in seen:
            seen.add(id(t))
            alive.append(t)
    if not alive and not step.effects:
        return
    _compute(rt, step, alive, eval_callback)


def _compute(rt, step, alive, eval_callback):
    ggml.check_device(rt.device)   # a lost RPC server: fail before planning (the compute checks again)
    # A held view would point into scratch memory: give it its own contiguous copy.
    for t in alive:
        if t._g.ptr.view_src != ggml.ffi.NULL:
            t._g = ggml.ops.cont(step.context(), t._g)
    if not rt.device.is_cpu:
        _route_unsupported(rt.device, step, alive)
    graph = ggml.Graph(step.n_tensors() + len(step.keep) + len(step.effects) + 64)
    for t in alive:
        t._g.set_output()   # held: GGML must write it (and not fuse it away into its consumer)
        ggml.lib.ggml_build_forward_expand(graph.ptr, t._g.ptr)
    for e in step.effects:
        ggml.lib.ggml_build_forward_expand(graph.ptr, e.ptr)

    blocks = {}
    for t in alive:
        key = t._g.ptr
        if key not in blocks:
            buffer = rt.pool.take(ggml.alloc_size(rt.device.buffer_type, t._g))
            buffer.place(t._g)
            blocks[key] = buffer
    # Host data goes straight into device memory, not into a CPU staging tensor that the scheduler
    # copies over during the compute; buffers of uploads nobody holds return to the pool after.
    scratch = []
    for gt, _ in step.uploads:
        if not gt.is_allocated:
            buffer = rt.pool.take(ggml.alloc_size(rt.device.buffer_type, gt))
            buffer.place(gt)
            scratch.append(Block(buffer, rt.pool))
    sched = rt.scheduler_for(graph.size)
    sched.alloc(graph)
    for gt, raw in step.uploads:
        ggml.lib.ggml_backend_tensor_set(gt.ptr, ggml.ffi.from_buffer("void *", raw), 0, raw.nbytes)
        stats.bytes_uploaded += raw.nbytes
    if graph.n_nodes:   # a step of uploads only has nothing to compute (RPC rejects empty graphs)
        sched.compute(graph, eval_callback or eval_hook)
    if _captured is not None:
        _captured.append(Replay(sched, graph, step, scratch))
    stats.computes += 1
    stats.nodes += graph.n_nodes
    stats.persisted += len(blocks)

    # Re-home the held tensors onto metadata of their own, so the step's contexts can be freed.
    home = ggml.Context(n_tensors=len(blocks))
    homed = {}
    for t in alive:
        key = t._g.ptr
        entry = homed.get(key)
        if entry is None:
            stored = home.new_tensor(t.dtype, t._g.ne)
            blocks[key].place(stored)
            entry = homed[key] = (stored, Block(blocks[key], rt.pool))
        t._g, t._block = entry
        t._step = None
    step.pending, step.effects, step.uploads, step.keep = [], [], [], []


def _route_unsupported(device, step, alive):
    """Held results whose op `device` cannot run are computed on the CPU fallback and copied over.

    A held tensor lives in a buffer of its device before the compute; ggml_backend_sched aborts the
    process when a pre-allocated tensor's op cannot run on the backend of its buffer. Such a result
    (cross_entropy_loss on Vulkan, out_prod of f16, ...) is left as CPU scratch and a `cont` copy, which
    every GPU backend runs, becomes the held tensor. In-place effects cannot be moved: a clear error.
    """
    moved = {}
    for t in alive:
        g = t._g
        if g.ptr.op == ggml.lib.GGML_OP_NONE or device.supports_op(g):
            continue
        key = g.ptr
        if key not in moved:
            g.set_output()
            copy = ggml.ops.cont(step.context(), g)
            if not device.supports_op(copy):
                raise ggml.DeviceError(f"{device.name} cannot compute {g.op} ({g.dtype.name}, ne={list(g.ne)}) "
                                       f"nor copy its result into device memory")
            moved[key] = copy
        t._g = moved[key]
    for e in step.effects:
        if not device.supports_op(e):
            raise ggml.DeviceError(f"{device.name} cannot run the in-place update {e.op} ({e.dtype.name}, "
                                   f"ne={list(e.ne)}) on tensors in its memory")


class Replay:
    """A computed graph kept with its allocation, to compute again with the same structure.

    This is the static-graph limit that define-by-run execution is measured against
    (benchmarks/bench_overhead.py): no tracing, no planning, only the uploads and GGML's compute.
    Valid only while nothing else is computed on the device (the scheduler's memory is shared).
    """

    def __init__(self, scheduler, graph, step, scratch):
        self.scheduler, self.graph, self.uploads = scheduler, graph, list(step.uploads)
        self._keep = (step, scratch)   # the graph's tensor metadata and the uploads' memory

    def run(self):
        for gt, raw in self.uploads:
            ggml.lib.ggml_backend_tensor_set(gt.ptr, ggml.ffi.from_buffer("void *", raw), 0, raw.nbytes)
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


def upload(step, gt, raw):
    """Schedule host bytes `raw` to be written into the pending leaf `gt` before the compute."""
    step.uploads.append((gt, raw))


def reset_pools():
    """Drop every pooled buffer (frees memory after a large job)."""
    for rt in _runtimes.values():
        for bucket in rt.pool.free.values():
            for buffer in bucket:
                buffer.free()
        rt.pool.free.clear()
        rt.pool.bytes = 0
