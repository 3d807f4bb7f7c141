"""Node counts of one autocast training step of the big GPT's shape (d512, 8 layers, ctx 256) at a small
batch on the CPU: GGML nodes per op (CPY = casts, CONT, MUL_MAT, ...) and in all, and the step's time.

The counts are a device-independent measure of what autocast adds to a step (issue 12: casts and
copies cost ~40% of the H200 step). Prints the per-op counts of one step after warm-up, then the median
step time of --steps steps and the CPU's compute buffer (the step's intermediates, as ggml-alloc lays
them out) and peak memory.

    python benchmarks/count_autocast_nodes.py [--batch 2] [--autocast f16] [--steps 3] [--config big]
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gpt  # noqa: E402
from gpt_torch import CONFIGS  # noqa: E402

import ggrad  # noqa: E402
from ggrad.autograd import execution  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="big", choices=sorted(CONFIGS))
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--autocast", choices=["f16", "bf16", "none"], default="f16")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    ggrad.set_num_threads(args.threads)
    cfg = dict(CONFIGS[args.config], batch=args.batch)
    step = bench_gpt.ggrad_step_fn("cpu", cfg, None if args.autocast == "none" else args.autocast)
    step()
    with ggrad.profile() as prof:
        step()
    counts = {op: calls for op, (calls, _) in prof.by_op().items()}
    for op, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"{op:<20}{n:>6}")
    print(f"{'total':<20}{sum(counts.values()):>6}")
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    print(f"step ms (median of {args.steps}): {sorted(times)[len(times) // 2] * 1e3:.1f}  "
          f"all: {', '.join(f'{t * 1e3:.0f}' for t in times)}")
    memory = execution.runtime(ggrad.device("cpu")).memory()
    print(f"compute buffer MiB: {memory['compute_buffer'] / 2 ** 20:.1f}  peak MiB: {memory['peak'] / 2 ** 20:.1f}")


if __name__ == "__main__":
    main()
