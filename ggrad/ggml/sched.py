"""`ggml_backend_sched`: computes a graph on a device, falling back to the CPU for ops it cannot run."""

from ._lib import ffi, lib
from .errors import GGMLError
from . import backend as _device
from . import hooks
from .threads import estimate_ns, policy as _threads


class Scheduler:
    """A scheduler over `device` (first) and the CPU (fallback), sized for graphs of `graph_size` nodes."""

    def __init__(self, dev, graph_size=4096):
        dev = _device.device(dev)
        self.device = dev
        self.graph_size = int(graph_size)
        self._cpu_backend = _device.cpu().backend
        self._op_name = f"graph compute on {dev.name}"   # for an abort's message (hooks.set_current_op)
        backends = [dev.backend] if dev.is_cpu else [dev.backend, self._cpu_backend]
        self._backends = ffi.new("ggml_backend_t[]", backends)
        ptr = lib.ggml_backend_sched_new(self._backends, ffi.NULL, len(backends), self.graph_size, False, True)
        if ptr == ffi.NULL:
            raise GGMLError(f"could not create a scheduler for {dev.name}")
        self.ptr = ffi.gc(ptr, lib.ggml_backend_sched_free)

    def alloc(self, graph):
        """Place the graph's unallocated tensors in the scheduler's compute buffers.

        The tensor-to-offset plan is made afresh for every graph (`reserve`): ggml-alloc's shortcut of
        reusing the previous plan is only safe for an identical graph, and telling whether two graphs
        match costs more than planning (0.09 ms for a 708-node training step). The compute buffers
        themselves are kept and only grow, so a step with the same structure allocates nothing.
        """
        # Splitting a graph over two backends rewires the sources of the nodes that read another
        # backend's tensor to the scheduler's copies; splitting it a second time (reserve, then alloc)
        # reads those stale copies, and every cross-backend input is garbage. With a device and the CPU,
        # the sources are therefore put back between the two.
        saved = self._save_sources(graph) if len(self._backends) > 1 else None
        lib.ggml_backend_sched_reset(self.ptr)
        if not lib.ggml_backend_sched_reserve(self.ptr, graph.ptr):
            raise MemoryError(f"could not plan a graph of {graph.n_nodes} nodes on {self.device.name}")
        if saved is not None:
            for node, src in saved:
                ffi.memmove(node.src, src, len(src))
        lib.ggml_backend_sched_reset(self.ptr)
        if not lib.ggml_backend_sched_alloc_graph(self.ptr, graph.ptr):
            raise MemoryError(f"could not allocate a graph of {graph.n_nodes} nodes on {self.device.name}")

    @staticmethod
    def _save_sources(graph):
        nodes = [lib.ggml_graph_node(graph.ptr, i) for i in range(lib.ggml_graph_n_nodes(graph.ptr))]
        return [(node, ffi.buffer(node.src)[:]) for node in nodes]

    def compute(self, graph, eval_callback=None):
        """Compute an allocated graph; `eval_callback(tensor, ask)` observes each node when given.

        The CPU backend's thread count is chosen here, for this graph (`ggrad.ggml.threads`).
        """
        if self.device.is_cpu:
            threads = _threads.threads_for(graph.ptr, _work_ns(graph))
        else:   # a device's graph: the CPU runs only its fallbacks
            threads = _threads.threads_for(None)
        lib.ggml_backend_cpu_set_n_threads(self._cpu_backend, threads)
        hooks.set_current_op(self._op_name)
        if eval_callback is None:   # the common case without the context manager's cost (a replayed step)
            status = lib.ggml_backend_sched_graph_compute(self.ptr, graph.ptr)
        else:
            with hooks.eval_callback(self, eval_callback):
                status = lib.ggml_backend_sched_graph_compute(self.ptr, graph.ptr)
        hooks.raise_pending()
        _device.check_device(self.device)   # a lost RPC server answers for itself: say so now
        if status != lib.GGML_STATUS_SUCCESS:
            raise GGMLError(f"graph compute failed on {self.device.name}: "
                            f"{ffi.string(lib.ggml_status_to_string(status)).decode()}")

    @property
    def n_splits(self):
        return int(lib.ggml_backend_sched_get_n_splits(self.ptr))

    def buffer_size(self, dev=None):
        dev = self.device if dev is None else _device.device(dev)
        return int(lib.ggml_backend_sched_get_buffer_size(self.ptr, dev.backend))


def _work_ns(graph):
    """The graph's single-thread compute estimate (threads.estimate_ns), kept on it while its nodes stay:
    a graph computed again (a replayed step, a cached trace) is not read again to choose its threads."""
    n = graph.n_nodes
    if graph.work is None or graph.work[0] != n:
        graph.work = (n, estimate_ns(graph.ptr))
    return graph.work[1]
