"""Where a GPT training step's compute time goes: `ggrad.profile()` per GGML op (ggrad's own CPU kernels by
their names), averaged over --steps steps after warm-up, with the median wall time of a plain step beside it
(profiled steps run node by node, so their total is a little above it).

    python benchmarks/profile_step.py [--config w2] [--threads 1] [--steps 5] [--by-shape] [--device cpu]
                                      [--autocast f16|bf16]
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gpt  # noqa: E402
from common import set_threads  # noqa: E402
from gpt_torch import CONFIGS  # noqa: E402

import ggrad  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="w2", choices=sorted(CONFIGS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--by-shape", action="store_true", help="one row per op and shape")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--autocast", choices=["f16", "bf16"], help="mixed precision (default: float32)")
    args = parser.parse_args()
    set_threads(args.threads)
    step = bench_gpt.ggrad_step_fn(args.device, CONFIGS[args.config], args.autocast)
    for _ in range(5):
        step()
    walls = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        walls.append(time.perf_counter() - start)
    with ggrad.profile() as prof:
        for _ in range(args.steps):
            step()
    prof.records = {key: (calls // args.steps, total / args.steps) for key, (calls, total) in prof.records.items()}
    precision = f"autocast {args.autocast}" if args.autocast else "float32"
    print(f"{args.config} {precision} training step on {args.device}, {args.threads} thread(s): median wall "
          f"{statistics.median(walls) * 1e3:.1f} ms; per step, profiled:")
    print(prof.table(top=args.top, by_shape=args.by_shape))


if __name__ == "__main__":
    main()
