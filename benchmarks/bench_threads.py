"""Threads on a loaded machine: the W2 step alone and beside a busy process, old default vs per-graph default.

"old default" fixes os.cpu_count() threads for every graph (ggrad before the per-graph choice); "per-graph"
is the default now (`ggrad.ggml.threads`: physical cores, one thread for small graphs, fewer while other
processes keep cores busy). "busy" runs a Python busy loop pinned to the last allowed CPU during warm-up and
timing. Each round measures every (load, setting) pair once (median of --steps steps after warm-up); the
table gives the median over --rounds rounds, and PyTorch (its default threads) for reference.

    python benchmarks/bench_threads.py [--rounds 3] [--steps 10] [--warmup 8] [--old-threads N]

(--old-threads: the old default's count where this machine's os.cpu_count() is not the one to compare,
e.g. under `taskset -c 0,1` on a larger host, where os.cpu_count() still counts every CPU.)
"""

import argparse
import collections
import contextlib
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gpt import W2, ggrad_step_fn, torch_step_fn  # noqa: E402
from common import median_ms, print_table  # noqa: E402

import ggrad  # noqa: E402
from ggrad.ggml import threads  # noqa: E402



class BusyLoop:
    """A Python process spinning on one CPU (the last this process may use) while the block runs."""

    def __enter__(self):
        cpu = max(os.sched_getaffinity(0))
        code = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True:\n    pass\n"
        self.proc = subprocess.Popen([sys.executable, "-c", code])
        time.sleep(0.2)
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


def measure_ggrad(step, setting, steps, warmup):
    """Median ms of `step` with `setting` threads (None: per graph) and the counts its graphs got."""
    ggrad.set_num_threads(setting)
    chosen = collections.Counter()

    def counted_step():
        step()
        chosen[threads.policy.last] += 1
    ms = median_ms(counted_step, warmup=warmup, repeats=steps)
    return ms, chosen


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=8,
                        help="untimed steps first (the per-graph default needs half a second to see a new load)")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch reference rows")
    parser.add_argument("--old-threads", type=int, default=os.cpu_count() or 1,
                        help="threads of the old default (default: os.cpu_count())")
    args = parser.parse_args()
    settings = {f"old default ({args.old_threads})": args.old_threads, "per-graph": None}
    print("load average before:", os.getloadavg(), "| GGML:", ggrad.ggml.build_info()["summary"])
    step = ggrad_step_fn()
    torch_step = None if args.no_torch else _torch_step()
    times = collections.defaultdict(list)
    counts = collections.defaultdict(collections.Counter)
    for _ in range(args.rounds):
        for load in ("alone", "busy"):
            with BusyLoop() if load == "busy" else contextlib.nullcontext():
                for name, setting in settings.items():
                    ms, chosen = measure_ggrad(step, setting, args.steps, args.warmup)
                    times[load, name].append(ms)
                    counts[load, name].update(chosen)
                if torch_step is not None:
                    times[load, "PyTorch"].append(median_ms(torch_step, warmup=3, repeats=args.steps))
    ggrad.set_num_threads(None)
    tokens = W2["batch"] * W2["context"]
    rows = []
    for (load, name), values in times.items():
        ms = statistics.median(values)
        threads_used = ", ".join(f"{n}: {c}" for n, c in sorted(counts[load, name].items())) or "-"
        rows.append({"load": load, "setting": name, "ms/step": f"{ms:.1f}", "tok/s": f"{tokens / ms * 1e3:,.0f}",
                     "rounds": " ".join(f"{v:.0f}" for v in values), "threads (graphs)": threads_used})
    print_table(f"W2 step, median of {args.rounds} rounds x {args.steps} steps; os.cpu_count()={os.cpu_count()}, "
                f"physical cores here={threads.physical_cores()}", rows, list(rows[0]))
    print("load average after:", os.getloadavg())


def _torch_step():
    try:
        return torch_step_fn()
    except ImportError:
        return None


if __name__ == "__main__":
    main()
