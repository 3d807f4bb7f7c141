"""The device memory a GPT training step plans under a backend's lowering, read on the CPU without computing it.

A step's peak (`ggrad.stats()`'s, what bench_gpt_gpu.py reports beside PyTorch's) is its held buffers (the pool:
parameters, gradients, optimizer state) plus the compute buffer GGML's allocator plans for its graph. Both
depend on the graph, not on the device that runs it, so the step is built here under the chosen backend's
Lowering (lowering.py) and planned, with the compute itself skipped (the values are never read): the big
GPT's autocast peaks printed this way equal the H100's to 0.1 MiB (1,682.4 and 1,746.4 MiB at two commits).
Use it to find what moves a GPU step's peak without a GPU.

    python benchmarks/plan_peak.py [--config big|w2] [--lowering CUDA_TWINS|CUDA|VULKAN|CPU]
                                   [--autocast f32 f16 bf16]
"""

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gpt  # noqa: E402
from gpt_torch import CONFIGS  # noqa: E402

import ggrad  # noqa: E402
from ggrad.autograd import execution, lowering, memory  # noqa: E402
from ggrad.ggml import sched  # noqa: E402

MiB = 2 ** 20


def planned_peak(config, choices, autocast):
    """(peak, held pool, compute buffer) in bytes of the `config` GPT's step under the Lowering `choices`."""
    dev = ggrad.device("cpu")
    compute = sched.Scheduler.compute
    sched.Scheduler.compute = lambda self, graph, eval_callback=None: None   # planned, never computed
    try:
        with execution.forced_lowering(dev, choices):
            step = bench_gpt.ggrad_step_fn("cpu", dict(CONFIGS[config]), None if autocast == "f32" else autocast)
            for _ in range(3):   # the first steps also place the parameters and the optimizer's state
                step()
            rt = memory.runtime(dev)
            return rt.peak, rt.pool.in_use, rt.scheduler.buffer_size()
    finally:
        sched.Scheduler.compute = compute


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="big", choices=sorted(CONFIGS))
    parser.add_argument("--lowering", default="CUDA_TWINS", choices=["CUDA_TWINS", "CUDA", "VULKAN", "CPU", "RPC"])
    parser.add_argument("--autocast", nargs="+", default=["f32", "f16", "bf16"], choices=["f32", "f16", "bf16"])
    args = parser.parse_args()
    if len(args.autocast) == 1:
        peak, held, buffer = planned_peak(args.config, getattr(lowering, args.lowering), args.autocast[0])
        print(f"{args.autocast[0]:6} {peak / MiB:9.1f} {held / MiB:9.1f} {buffer / MiB:15.1f}")
        return
    print(f"{args.config} step planned under the {args.lowering} lowering (MiB)")
    print(f"{'mode':6} {'peak':>9} {'held':>9} {'compute buffer':>15}")
    for mode in args.autocast:   # each in a process of its own: a step's memory is the process's peak
        subprocess.run([sys.executable, __file__, "--config", args.config, "--lowering", args.lowering,
                        "--autocast", mode], check=True)


if __name__ == "__main__":
    main()
