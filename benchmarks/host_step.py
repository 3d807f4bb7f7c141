"""Host time of a training step, eager (recorded every step) vs replayed (ggrad.compile_step), ggrad only.

The big GPT's structure (8 layers x 8 heads, vocab 96; benchmarks/gpt_torch.py BIG) at a small size
(d_model 32, context 16, batch 2 by default) so that GGML's compute is small, built with the CUDA
backend's lowering on the CPU (`--lowering CUDA`, the default: the H100's graph) and one thread. The figure
is the main thread's CPU time a step less GGML's compute (common.HostCPU, as bench_record.py): what a
GPU step waits on the host. f32, autocast bf16 and autocast f16 (+ GradScaler) each eager and replayed,
in alternated rounds (every variant once a round, so the machine's load changes hit all alike); each
round's figure is the median of --steps steps after warm-up, and the table gives the median of the rounds.

    python benchmarks/host_step.py [--rounds 3] [--steps 10] [--modes f32 bf16 f16] [--lowering CUDA|CPU]
    python benchmarks/host_step.py --config w2 --lowering CPU --modes f32      # W2 as bench_gpt.py runs it
"""

import argparse
import contextlib
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gpt  # noqa: E402
from common import HostCPU, print_table  # noqa: E402
from gpt_torch import CONFIGS  # noqa: E402

import ggrad  # noqa: E402
from ggrad.autograd import execution, lowering  # noqa: E402
from ggrad.ggml import sched  # noqa: E402

HOST = HostCPU(sched.Scheduler)


def host_ms(step, steps, warmup=4):
    """Median main-thread CPU ms outside GGML's compute of `steps` calls of `step` after `warmup`."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        with HOST:
            step()
        times.append(HOST.seconds * 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--modes", nargs="+", default=["f32", "bf16", "f16"], choices=["f32", "bf16", "f16"])
    parser.add_argument("--lowering", default="CUDA", choices=["CUDA", "CPU", "VULKAN"])
    parser.add_argument("--config", default="big", choices=sorted(CONFIGS),
                        help="the GPT's structure (`w2` at its own size: the sizes below apply to `big` only)")
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--context", type=int, default=16)
    parser.add_argument("--batch", type=int, default=2)
    args = parser.parse_args()
    ggrad.set_num_threads(1)
    cfg = CONFIGS[args.config]
    if args.config == "big":
        cfg = dict(cfg, d_model=args.d_model, context=args.context, batch=args.batch)
    dev = ggrad.device("cpu")
    forced = execution.forced_lowering(dev, getattr(lowering, args.lowering)) if args.lowering != "CPU" \
        else contextlib.nullcontext()
    figures = {(mode, replay): [] for mode in args.modes for replay in (False, True)}
    with forced:
        for _ in range(args.rounds):
            for (mode, replay), got in figures.items():
                step = bench_gpt.ggrad_step_fn("cpu", cfg, None if mode == "f32" else mode, replay=replay)
                got.append(host_ms(step, args.steps))
    rows = []
    for mode in args.modes:
        eager, replayed = (statistics.median(figures[(mode, r)]) for r in (False, True))
        rows.append({"step": mode if mode == "f32" else f"autocast {mode}", "eager host ms": f"{eager:.2f}",
                     "replayed host ms": f"{replayed:.3f}", "eager / replayed": f"{eager / replayed:.0f}x",
                     "rounds (eager)": " ".join(f"{v:.2f}" for v in figures[(mode, False)]),
                     "rounds (replayed)": " ".join(f"{v:.3f}" for v in figures[(mode, True)])})
    print_table(f"host CPU ms a step, {args.config} GPT at d_model {cfg['d_model']}, ctx {cfg['context']}, batch "
                f"{cfg['batch']}, {args.lowering} lowering on the CPU, 1 thread (median of {args.rounds} rounds)",
                rows, list(rows[0]))


if __name__ == "__main__":
    main()
