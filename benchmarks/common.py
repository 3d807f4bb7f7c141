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
