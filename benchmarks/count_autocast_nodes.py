"""Node counts of one autocast training step of the big GPT's shape (d512, 8 layers, ctx 256) at a small
batch on the CPU: GGML nodes per op (CPY = casts, CONT, MUL_MAT, ...) and in all, and the step's time.

The counts are a device-independent measure of what autocast adds to a step (issue 12: casts and
copies cost ~40% of the H200 step). Prints the per-op counts of one step after warm-up and the number of
ops recorded in Python (Primitive records: the host's cost of a step grows with it, and on the H200 the
host's recording is most of an autocast step), then the median step time of --steps steps, its host
CPU time (the main thread's CPU time less GGML's compute), and the CPU's compute buffer (the step's
intermediates, as ggml-alloc lays them out) and peak memory. `--lowering CUDA` builds the step with the
CUDA backend's choices (lowering.py) on the CPU: the H200's graph, counted here.

    python benchmarks/count_autocast_nodes.py [--batch 2] [--autocast f16] [--steps 3] [--config big]
                                              [--lowering CPU|CUDA|VULKAN]
"""

import argparse
import contextlib
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gpt  # noqa: E402
from common import HostCPU  # noqa: E402
from gpt_torch import CONFIGS  # noqa: E402

import ggrad  # noqa: E402
from ggrad.autograd import execution, lowering, memory  # noqa: E402
from ggrad.autograd.primitive import Primitive  # noqa: E402
from ggrad.ggml import sched  # noqa: E402


class HostClock:
    """Counts recorded ops (patched in while the script runs); `host` times the main thread outside GGML's compute."""

    def __init__(self):
        self.recorded = 0
        self.host = HostCPU(sched.Scheduler)
        record = Primitive._record.__func__

        def counting(cls, ctx, args, tensors):
            self.recorded += 1
            return record(cls, ctx, args, tensors)
        Primitive._record = classmethod(counting)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="big", choices=sorted(CONFIGS))
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--autocast", choices=["f16", "bf16", "none"], default="f16")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lowering", choices=["CPU", "CUDA", "CUDA_TWINS", "VULKAN"],
                        help="build the step with this backend's lowering (default: the CPU's own)")
    args = parser.parse_args()
    ggrad.set_num_threads(args.threads)
    cfg = dict(CONFIGS[args.config], batch=args.batch)
    clock = HostClock()
    dev = ggrad.device("cpu")
    forced = contextlib.nullcontext() if args.lowering is None else execution.forced_lowering(dev, getattr(lowering, args.lowering))
    with forced:
        step = bench_gpt.ggrad_step_fn("cpu", cfg, None if args.autocast == "none" else args.autocast)
        step()
        clock.recorded = 0
        with ggrad.profile() as prof:
            step()
        recorded = clock.recorded
        counts = {op: calls for op, (calls, _) in prof.by_op().items()}
        for op, n in sorted(counts.items(), key=lambda kv: -kv[1]):
            print(f"{op:<20}{n:>6}")
        print(f"{'total':<20}{sum(counts.values()):>6}")
        print(f"{'recorded ops':<20}{recorded:>6}")
        times, host = [], []
        for _ in range(args.steps):
            start = time.perf_counter()
            with clock.host:
                step()
            times.append(time.perf_counter() - start)
            host.append(clock.host.seconds)
    print(f"step ms (median of {args.steps}): {statistics.median(times) * 1e3:.1f}  "
          f"all: {', '.join(f'{t * 1e3:.0f}' for t in times)}")
    print(f"host CPU ms (median): {statistics.median(host) * 1e3:.1f}")
    usage = memory.runtime(ggrad.device("cpu")).memory()
    print(f"compute buffer MiB: {usage['compute_buffer'] / 2 ** 20:.1f}  peak MiB: {usage['peak'] / 2 ** 20:.1f}")


if __name__ == "__main__":
    main()
