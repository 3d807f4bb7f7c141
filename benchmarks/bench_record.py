"""Host cost of define-by-run recording: microseconds of Python per recorded op, and the host CPU time of
a W2 training step, graph cache off and on (ggrad only).

Times are the main thread's CPU time (`time.thread_time`), not wall time: on a shared machine another
process' load stretches wall time but not the CPU time this thread spends recording. GGML's compute is
taken out of the step by timing `Scheduler.compute` the same way (its worker threads are other threads).

- per op: a chain of `--ops` elementwise ops on [16, 16] tensors that require grad (mul, add, tanh,
  scalar mul), recorded and then computed with its backward; the figure is the recording of the forward
  divided by the number of ops. With the cache on, the chain repeats, so every event replays.
- W2 step: benchmarks/bench_gpt.py's step (forward, backward, AdamW, `loss.item()`), host CPU time per
  step and its share of the step's wall time.

Each figure is the median of `--runs` runs (each the median of its repeats).

    python benchmarks/bench_record.py [--runs 5] [--ops 400] [--steps 10] [--threads 1]
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import HostCPU, print_table  # noqa: E402

import ggrad  # noqa: E402
from ggrad.ggml.sched import Scheduler  # noqa: E402

HOST = HostCPU(Scheduler)


def per_op_us(n_ops, repeats=9):
    """Least µs (of `repeats`) of main-thread CPU per recorded op of an elementwise chain that requires grad."""
    ggrad.manual_seed(0)
    w = ggrad.randn(16, 16, requires_grad=True)
    b = ggrad.randn(16, 16, requires_grad=True)
    x0 = ggrad.randn(16, 16)
    times = []
    for _ in range(repeats + 2):
        start = time.thread_time()
        x = x0
        for _ in range(n_ops // 4):
            x = ((x * w + b).tanh()) * 0.5
        elapsed = time.thread_time() - start
        x.sum().backward()
        w.grad = b.grad = None
        ggrad.realize()
        times.append(elapsed / (n_ops // 4 * 4) * 1e6)
    return min(times[2:])


def w2_host(steps, device="cpu"):
    """Median (host CPU ms, step wall ms) of a W2 step after 3 warm-up steps."""
    from bench_gpt import ggrad_step_fn
    step = ggrad_step_fn(device)
    for _ in range(3):
        step()
    host, wall = [], []
    for _ in range(steps):
        start = time.perf_counter()
        with HOST:
            step()
        wall.append((time.perf_counter() - start) * 1e3)
        host.append(HOST.seconds * 1e3)
    return statistics.median(host), statistics.median(wall)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--ops", type=int, default=400)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-w2", action="store_true", help="only the per-op figure")
    args = parser.parse_args()
    ggrad.set_num_threads(args.threads)
    rows = []
    for cached in (False, True):
        ggrad.set_graph_cache(cached)
        ops = [per_op_us(args.ops) for _ in range(args.runs)]
        row = {"graph cache": "on" if cached else "off", "us/op": f"{statistics.median(ops):.1f}",
               "us/op (runs)": " ".join(f"{v:.1f}" for v in ops)}
        if not args.no_w2:
            runs = [w2_host(args.steps, args.device) for _ in range(args.runs)]
            host = statistics.median(r[0] for r in runs)
            wall = statistics.median(r[1] for r in runs)
            row.update({"W2 host ms": f"{host:.2f}", "W2 host ms (runs)": " ".join(f"{r[0]:.1f}" for r in runs),
                        "W2 step ms": f"{wall:.1f}", "host share": f"{host / wall * 100:.1f}%"})
        rows.append(row)
    ggrad.set_graph_cache(True)
    print_table(f"Recording cost (main-thread CPU; {args.threads} GGML thread(s), {args.device}, median of "
                f"{args.runs} runs)", rows, list(rows[0]))


if __name__ == "__main__":
    main()
