"""How many CPU threads a graph computes with: physical cores, fewer for small graphs or a busy machine.

GGML's CPU threads meet at a barrier after every node of a graph and wait there by spinning (GGML's own
thread pool always; an OpenMP build for libgomp's spin count before it sleeps). A thread that loses its
core to another process therefore holds every other thread at the next barrier for up to a scheduler time
slice: with os.cpu_count() threads and one busy process on a 2-core machine a training step became 3x
(up to 10-20x) slower. The default count, chosen for each graph when it is computed, is therefore:

- at most one thread per physical core this process may run on (hyper-threads of one core share its
  arithmetic units and slow each other down while they spin), and no more than a cgroup CPU quota allows;
- one thread for a graph whose estimated work cannot pay for a barrier after each of its nodes;
- one thread less per core that other processes kept busy over the last half second: the CPU time the
  allowed CPUs spent outside this process (`/proc/stat` against this process's own CPU time).

`set_num_threads(n)`, or `GGRAD_NUM_THREADS=n` in the environment, fixes the count for every graph instead
(as `torch.set_num_threads` does), e.g. to compare with PyTorch at the same thread count.
"""

import math
import os
import time
import warnings

from ._lib import ffi, lib
from .kernels import kernel_name

ENV_VAR = "GGRAD_NUM_THREADS"

# Rough single-thread costs, to tell a graph worth splitting from one that is not: a multiply-add of a
# matrix product (~50 G/s with AVX2 or AVX-512 kernels) and one element of any other op (~2 G/s).
NS_PER_MAC = 0.02
NS_PER_ELEMENT = 0.5
# Each thread beyond the first must get this much of the estimated work, or the graph runs on fewer:
# it pays for starting the threads and for a barrier after every node.
NS_PER_THREAD = 200_000
# The estimate reads at most this many nodes (evenly spread) of a large graph, to stay cheap.
MAX_NODES_READ = 64
LOAD_INTERVAL_S = 0.5


def physical_cores(cpus=None, sys_cpu="/sys/devices/system/cpu", cgroup_cpu_max="/sys/fs/cgroup/cpu.max"):
    """Physical cores among the CPUs this process may run on (`cpus`: logical CPU ids), within a cgroup quota.

    Hyper-threads of one core count once (`topology/core_cpus_list` names a core's logical CPUs).
    """
    if cpus is None:
        cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    cores = set()
    for cpu in cpus:
        cores.add(_read_first(f"{sys_cpu}/cpu{cpu}/topology/core_cpus_list",
                              f"{sys_cpu}/cpu{cpu}/topology/thread_siblings_list") or str(cpu))
    n = max(1, len(cores))
    quota = cgroup_cpus(cgroup_cpu_max)
    return n if quota is None else max(1, min(n, quota))


def cgroup_cpus(path="/sys/fs/cgroup/cpu.max"):
    """CPUs a cgroup v2 quota (`cpu.max`: "QUOTA PERIOD" or "max PERIOD") allows, rounded up; None if unlimited."""
    text = _read_first(path)
    if not text:
        return None
    fields = text.split()
    if len(fields) != 2 or fields[0] == "max":
        return None
    try:
        return math.ceil(int(fields[0]) / int(fields[1]))
    except (ValueError, ZeroDivisionError):
        return None


def _read_first(*paths):
    for path in paths:
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            continue
    return None


def estimate_ns(graph_ptr, enough=math.inf):
    """Estimated single-thread compute time of a `ggml_cgraph` in nanoseconds.

    Matrix products count their multiply-adds, every other node its elements (or its first source's, for
    reductions). Stops early once the estimate passes `enough`; a graph of more than MAX_NODES_READ
    nodes is sampled evenly and the sum scaled up.
    """
    n = lib.ggml_graph_n_nodes(graph_ptr)
    stride = max(1, math.ceil(n / MAX_NODES_READ))
    total = 0.0
    for i in range(0, n, stride):
        total += _node_ns(lib.ggml_graph_node(graph_ptr, i)) * stride
        if total >= enough:
            break
    return total


_NO_WORK = frozenset((lib.GGML_OP_NONE, lib.GGML_OP_VIEW, lib.GGML_OP_RESHAPE, lib.GGML_OP_PERMUTE,
                      lib.GGML_OP_TRANSPOSE))


def _node_ns(node):
    op = node.op
    if op == lib.GGML_OP_MUL_MAT or kernel_name(node) == "matmul_f32":
        return lib.ggml_nelements(node) * node.src[0].ne[0] * NS_PER_MAC
    if op == lib.GGML_OP_OUT_PROD:
        return lib.ggml_nelements(node) * node.src[0].ne[1] * NS_PER_MAC
    if op in _NO_WORK:
        return 0.0
    src = node.src[0]
    elements = lib.ggml_nelements(node)
    if src != ffi.NULL:
        elements = max(elements, lib.ggml_nelements(src))
    return elements * NS_PER_ELEMENT


def choose(work_ns, limit, others_busy=0.0):
    """Threads for a graph of `work_ns` estimated work: at most `limit`, minus the cores others keep busy.

    `others_busy` is in cores (1.0: one core fully used by other processes); a core counts as taken once
    others use more than half of it.
    """
    by_work = int(min(limit, work_ns / NS_PER_THREAD))
    free = int(limit - others_busy + 0.5)
    return max(1, min(limit, by_work, free))


class BusyMeter:
    """Cores that other processes kept busy on `cpus`, averaged over the last LOAD_INTERVAL_S or more.

    Compares the CPUs' busy time in `/proc/stat` with this process's own CPU time, so that GGML's and
    PyTorch's threads in this process never count as load. 0.0 where `/proc/stat` cannot be read.
    """

    def __init__(self, cpus, stat_path="/proc/stat", clock=time.monotonic, own_cpu=time.process_time):
        self.cpus = {f"cpu{c}" for c in cpus}
        self.stat_path = stat_path
        self.clock, self.own_cpu = clock, own_cpu
        self.ticks_per_s = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.others = 0.0
        self._last = None

    def sample(self):
        """The current estimate, refreshed when the last sample is LOAD_INTERVAL_S old."""
        now = self.clock()
        if self._last is not None and now - self._last[0] < LOAD_INTERVAL_S:
            return self.others
        busy = self._busy_s()
        if busy is None:
            return self.others
        current = (now, busy, self.own_cpu())
        if self._last is not None:
            wall, cpus_busy, own = (a - b for a, b in zip(current, self._last))
            self.others = max(0.0, (cpus_busy - own) / wall)
        self._last = current
        return self.others

    def _busy_s(self):
        text = _read_first(self.stat_path)
        if text is None:
            return None
        return busy_ticks(text, self.cpus) / self.ticks_per_s


def busy_ticks(proc_stat, cpu_names):
    """Busy clock ticks of the named CPUs (`cpu0`, ...) in `/proc/stat` text: all but idle and iowait.

    Time stolen by the hypervisor counts as busy: another machine had the core.
    """
    total = 0
    for line in proc_stat.splitlines():
        fields = line.split()
        if fields and fields[0] in cpu_names:
            ticks = [int(v) for v in fields[1:9]]   # user nice system idle iowait irq softirq steal
            total += sum(ticks) - ticks[3] - ticks[4]
    return total


class ThreadPolicy:
    """The thread count of each graph: fixed by the user, or chosen per graph (see the module docstring)."""

    def __init__(self, limit=None, fixed=None, meter=None):
        cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
        self.limit = limit if limit is not None else physical_cores(cpus)
        self.fixed = fixed
        self.meter = meter if meter is not None else BusyMeter(cpus)
        self.last = None   # the count the last graph got

    @property
    def max_threads(self):
        return self.fixed if self.fixed is not None else self.limit

    def threads_for(self, graph_ptr, work_ns=None):
        """Threads to compute `graph_ptr` with (None: a graph of unknown work, e.g. a GPU step's CPU part);
        `work_ns`: its `estimate_ns` where the caller knows it already (a graph computed again)."""
        self.last = self._choose(graph_ptr, work_ns)
        return self.last

    def _choose(self, graph_ptr, work_ns):
        if self.fixed is not None:
            return self.fixed
        if self.limit == 1:
            return 1
        if work_ns is not None:
            work = work_ns
        else:
            work = math.inf if graph_ptr is None else estimate_ns(graph_ptr, enough=self.limit * NS_PER_THREAD)
        if work < 2 * NS_PER_THREAD:
            return 1   # too small to split: no need to look at the machine's load
        return choose(work, self.limit, self.meter.sample())


def fixed_from_env(environ=os.environ):
    """GGRAD_NUM_THREADS as a positive int, or None (unset; a bad value warns and is ignored)."""
    value = environ.get(ENV_VAR, "").strip()
    if not value:
        return None
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        warnings.warn(f"{ENV_VAR}={value!r} is not a positive integer; ignored (threads chosen per graph)",
                      RuntimeWarning, stacklevel=2)
        return None
    return n


policy = ThreadPolicy(fixed=fixed_from_env())
