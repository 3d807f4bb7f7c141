"""Device memory: each device's runtime (its current pending graph, scheduler and buffer pool), the pooled
buffers and Blocks that hold computed tensors, moving results out of the compute buffer before the next
compute (`Runtime.evacuate`) and onto metadata of their own after one (`rehome`), and the public counters.
"""

import threading
import weakref

from .. import ggml
from ..ggml import placement
from ..ggml.errors import DeviceError
from . import device_locks
from .pending import PendingGraph

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
            rt.peak = rt.pool.in_use + rt.compute_buffer_bytes() + rt.replay_buffer_bytes()

    def __repr__(self):
        return f"Stats({self.as_dict()})"


_runtimes = {}   # device name -> Runtime
stats = Stats()
_runtimes_lock = threading.Lock()


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
    buffer first if anybody still holds it (`Runtime.evacuate`). `keep` holds what owns that compute
    buffer when it is not the device's scheduler (an OwnedGraph's), so the memory outlives its owner."""

    __slots__ = ("buffer", "pool", "node", "keep", "__weakref__")

    def __init__(self, buffer, pool, node=None, keep=None):
        self.buffer = buffer
        self.pool = pool
        self.node = node
        self.keep = keep

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
        self.lock = device_locks.lock_of(device)
        self.cache = []            # trace_cache Entries of this device, most recently used first
        self.planned_for = None    # the Entry whose graph the scheduler's memory is laid out for
        self.graph = PendingGraph(device, self.cache)
        self.scheduler = None
        self.pool = BufferPool(device)
        self.peak = 0              # the most device memory a compute has used (see memory())
        # weak references to the Blocks of the last compute's results that live in the compute buffer (Block)
        self.in_compute_buffer = []
        # GGML's RPC client sends GRAPH_RECOMPUTE for a scheduler split whose uid is unchanged, and the
        # server then runs its stored copy with the tensor addresses of last time; a replayed entry's inputs
        # and held host data may have other buffers. Planning again gives the splits new uids: the graph is
        # sent again.
        self.resends_graphs = device.backend_name == "RPC"
        self.owned = weakref.WeakSet()   # OwnedGraphs of this device: graphs replayed in compute buffers of their own

    def compute_buffer_bytes(self):
        return self.scheduler.buffer_size() if self.scheduler is not None else 0

    def replay_buffer_bytes(self):
        """The compute buffers of this device's replayed steps (owned_graph.py)."""
        return sum(owned.buffer_bytes() for owned in list(self.owned))

    def memory(self):
        """Device memory in bytes: the scheduler's compute buffer (intermediates of a step), persistent
        tensors (every tensor held: parameters, optimizer state, gradients, held results, cached uploads;
        `in_compute_buffer` of them are results of the last compute still where it made them), free
        buffers kept for reuse, the compute buffers of replayed steps (owned_graph.py), and the peak of
        compute buffers + pooled tensors over the computes since `ggrad.reset_stats()` (as
        `torch.cuda.max_memory_allocated`, free cached memory is not counted)."""
        held = 0
        for ref in self.in_compute_buffer:
            block = ref()
            if block is not None and block.pool is None:
                held += block.node.nbytes
        replays = self.replay_buffer_bytes()
        return {"compute_buffer": self.compute_buffer_bytes(), "persistent": self.pool.in_use + held,
                "in_compute_buffer": held, "pooled": self.pool.bytes, "replay_buffers": replays,
                "peak": max(self.peak, self.pool.in_use + self.compute_buffer_bytes() + replays)}

    def evacuate(self, pending):
        """Before a compute overwrites the compute buffer: move the results of the last compute that are
        still held (by a Tensor, or read by `pending`) into pooled buffers of their own, and point what
        `pending` built on their old memory (views, the graph cache's stand-ins) at the new."""
        held, self.in_compute_buffer = self.in_compute_buffer, []
        moved = self.move_out(held)
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

    def move_out(self, held):
        """Move the Blocks of `held` (weak references) that are still alive and in a compute buffer into
        pooled buffers of their own; returns the pointers of the metadata moved."""
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
            block.buffer, block.pool, block.node, block.keep = buffer, self.pool, None, None
            moved.add(node.ptr)
        return moved

    def hand_over(self, scheduler, entry):
        """Give `scheduler` (which just computed `entry`'s graph, a trace_cache Entry or None) and the results
        of that compute still in its buffer to a replayed step (owned_graph.py): this device plans its next
        graph in a scheduler of its own, and the entry leaves the cache (its nodes are placed in the buffer
        handed over; each result's Block keeps the scheduler's buffer). Returns the weak references to those
        results' Blocks."""
        if self.scheduler is scheduler:
            self.scheduler = None
        self.planned_for = None
        if entry is not None and entry in self.cache:
            self.cache.remove(entry)
        held, results, self.in_compute_buffer = [], self.in_compute_buffer, []
        for ref in results:
            block = ref()
            if block is not None and block.pool is None:
                block.keep = scheduler
                held.append(ref)
        return held

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


def runtimes_by_name():
    """(device name, runtime) of every device used so far."""
    return list(_runtimes.items())


def all_runtimes():
    """The runtimes of every device used so far."""
    return list(_runtimes.values())


def pending_graph(device):
    """The graph that new ops on `device` add their nodes to."""
    return runtime(device).graph


def graph_of(*tensors):
    """The PendingGraph of the device all `tensors` share (DeviceError when they differ; the error of its
    compute for a tensor whose graph failed its checks)."""
    device = tensors[0].device
    for t in tensors:
        if t.device is not device and t.device != device:
            raise DeviceError(f"expected all tensors on the same device, got {device.torch_name} and "
                              f"{t.device.torch_name}; move one with .to(device)")
        if t._pending.__class__ is FailedGraph:
            raise t._pending.error
    return runtime(device).graph


class Homes:
    """Metadata of its own over a computed node's memory (its buffer's start, or the compute buffer), made in
    one Context for at most `capacity` nodes when first needed: what a result keeps once the graph's contexts
    are freed (`rehome`, OwnedGraph.results)."""

    def __init__(self, capacity):
        self.capacity = capacity
        self._context = None

    def over(self, node, last=None):
        """Metadata over `node`'s memory: `last`'s, (metadata, weak reference of its Block) from an earlier
        compute of the same plan, where that Block is gone and the metadata still points at node's memory (no
        tensor uses it: used again), else new."""
        if last is not None and last[1]() is None and last[0].location == node.location:
            return last[0]
        if self._context is None:
            self._context = ggml.Context(n_tensors=self.capacity)
        stored = self._context.like(node)
        placement.bind(stored.ptr, node.ptr)
        return stored


def rehome(rt, alive, blocks, rehomed=None):
    """Give the held tensors `alive` of a finished compute their memory on metadata of their own (so the pending
    graph's contexts can be freed); returns how many distinct results were kept.

    A held result in the compute buffer gets a Block that `Runtime.evacuate` moves before the next compute;
    held host data its pooled buffer (`blocks`). `rehomed` (a replayed Entry's) keeps, per held result, the
    metadata it was re-homed onto the last time and its Block (weakly): where that Block is gone and the
    metadata still points at this result's memory (the entry's plan places it at the same address), no tensor
    uses it any more and it is used again (a W2 step re-homes its 50 gradients every step)."""
    homes = Homes(len(alive))
    homed = {}
    held = rt.in_compute_buffer
    for t in alive:
        key = t._node.ptr
        entry = homed.get(key)
        if entry is None:
            buffer = blocks.get(key)
            stored = homes.over(t._node, rehomed.get(key) if rehomed is not None else None)
            if buffer is not None:
                block = Block(buffer, rt.pool)
            else:
                block = Block(None, None, stored)
                held.append(weakref.ref(block))
            if rehomed is not None:
                rehomed[key] = (stored, weakref.ref(block))
            entry = homed[key] = (stored, block)
        t._computed(*entry)
    return len(homed)


def reset_pools():
    """Drop every pooled buffer (frees memory after a large job)."""
    for rt in all_runtimes():
        rt.pool.clear()
