"""Framework overhead: ggrad's define-by-run W2 step vs the same step as a static GGML graph.

The static graph is ggrad's own step recorded once (`execution.capture`) and then recomputed on the
same allocation: it pays only the input upload and GGML's compute - the limit for any framework on
GGML. The define-by-run step pays, in addition, Python tracing, graph building, planning and
buffer bookkeeping every step. Target: within 10%.

    python benchmarks/bench_overhead.py [--threads 2] [--steps 20]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gpt import ggrad_step_fn  # noqa: E402
from common import median_ms, print_table, set_threads  # noqa: E402

import ggrad  # noqa: E402
from ggrad.autograd import execution  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[2])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    rows = []
    for threads in args.threads:
        set_threads(threads)
        step = ggrad_step_fn(args.device)
        dynamic_ms = median_ms(step, warmup=5, repeats=args.steps)
        with execution.capture() as replays:
            step()
        replay = replays[-1]
        static_ms = median_ms(replay.run, warmup=3, repeats=args.steps)
        ggrad.reset_stats()
        rows.append({"threads": threads, "static graph ms": f"{static_ms:.1f}",
                     "define-by-run ms": f"{dynamic_ms:.1f}",
                     "overhead": f"{(dynamic_ms / static_ms - 1) * 100:+.1f}%",
                     "nodes": replay.graph.n_nodes})
    print_table(f"W2 step: define-by-run vs static GGML graph ({args.device}, median of {args.steps})", rows,
                list(rows[0]))


if __name__ == "__main__":
    main()
