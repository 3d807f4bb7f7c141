"""Framework overhead: ggrad's define-by-run W2 step with and without the graph cache, against the same
step as a static GGML graph and against PyTorch, in one run.

Each step is split into GGML's compute (`ggrad.stats()["compute_seconds"]`) and host work: Python
recording of the ops, graph building, planning and buffer bookkeeping. The static graph is ggrad's own
step recorded once (`execution.capture`) and recomputed on the same allocation: only the input upload
and GGML's compute, the limit for any framework on GGML. Target: host work under 10% of the compute.

    python benchmarks/bench_overhead.py [--threads 2] [--steps 20]
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gpt import ggrad_step_fn  # noqa: E402
from common import median_ms, print_table, set_threads  # noqa: E402
from gpt_torch import torch_step_fn  # noqa: E402

import ggrad  # noqa: E402
from ggrad.autograd import execution  # noqa: E402


def split_ms(step, warmup, repeats):
    """Median (step, compute, host) milliseconds of `step()` after `warmup` calls."""
    for _ in range(warmup):
        step()
    rows = []
    for _ in range(repeats):
        before = ggrad.stats()["compute_seconds"]
        start = time.perf_counter()
        step()
        total = time.perf_counter() - start
        compute = ggrad.stats()["compute_seconds"] - before
        rows.append((total * 1e3, compute * 1e3, (total - compute) * 1e3))
    return [statistics.median(r[i] for r in rows) for i in range(3)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[2])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    rows = []
    for threads in args.threads:
        set_threads(threads)
        try:
            torch_ms = median_ms(torch_step_fn(), warmup=5, repeats=args.steps)
        except ImportError:
            torch_ms = float("nan")
        for cached in (False, True):
            ggrad.set_graph_cache(cached)
            step = ggrad_step_fn(args.device)
            total, compute, host = split_ms(step, warmup=5, repeats=args.steps)
            rows.append({"threads": threads, "graph cache": "on" if cached else "off", "step ms": f"{total:.1f}",
                         "compute ms": f"{compute:.1f}", "host ms": f"{host:.2f}",
                         "host/compute": f"{host / compute * 100:.1f}%", "torch ms": f"{torch_ms:.1f}",
                         "ratio ggrad/torch": f"{torch_ms / total:.2f}"})
        with execution.capture() as replays:
            step()
        static_ms = median_ms(replays[-1].run, warmup=3, repeats=args.steps)
        rows.append({"threads": threads, "graph cache": "static graph", "step ms": f"{static_ms:.1f}",
                     "compute ms": "", "host ms": "", "host/compute": "", "torch ms": f"{torch_ms:.1f}",
                     "ratio ggrad/torch": f"{torch_ms / static_ms:.2f}"})
        ggrad.set_graph_cache(True)
    print_table(f"W2 step: host work and compute, graph cache off/on ({args.device}, median of {args.steps})",
                rows, list(rows[0]))


if __name__ == "__main__":
    main()
