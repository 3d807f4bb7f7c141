"""Shared helpers for the benchmarks: timing, thread pinning, table printing."""

import statistics
import time


def median_ms(step, warmup=3, repeats=20):
    """Median wall time of `step()` in milliseconds after `warmup` untimed calls."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def print_table(title, rows, columns):
    """Print `rows` (dicts) as an aligned text table under `title`."""
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    print(f"\n{title}")
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for r in rows:
        print("  ".join(str(r[c]).ljust(widths[c]) for c in columns))


def set_threads(n):
    """Use n threads in both frameworks."""
    import ggrad
    ggrad.set_num_threads(n)
    try:
        import torch
        torch.set_num_threads(n)
    except ImportError:
        pass


class HostCPU:
    """Main-thread CPU time outside GGML's compute (`time.thread_time`, which other processes' load does not
    stretch as it stretches wall time): ggrad's `Scheduler.compute` (the class passed in) is timed the same
    way and taken out. Install once per process (`HostCPU(ggrad.ggml.sched.Scheduler)`), then
    `with host:` ... `host.seconds`."""

    def __init__(self, scheduler_class):
        self.in_compute = 0.0
        original = scheduler_class.compute

        def compute(scheduler, graph, eval_callback=None):
            start = time.thread_time()
            try:
                return original(scheduler, graph, eval_callback)
            finally:
                self.in_compute += time.thread_time() - start
        scheduler_class.compute = compute

    def __enter__(self):
        self.in_compute, self._start = 0.0, time.thread_time()
        return self

    def __exit__(self, *exc):
        self.seconds = time.thread_time() - self._start - self.in_compute

