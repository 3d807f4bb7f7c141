"""Workload W2 on a GPU: char-GPT training step, ggrad on a GGML device vs PyTorch on CUDA, in one run.

The same model and step as bench_gpt.py (vocab 96, pre-LN GELU blocks, tied embeddings, AdamW), at W2's
size and optionally at a larger one. PyTorch runs eager f32 (TF32 off, its default for matmul), on
`cuda:0`. Both steps end in `loss.item()`, which waits for the GPU. Prints tokens/s (median of --steps
steps after warm-up), the ratio, and how many pieces GGML's scheduler split ggrad's step into
(1 = all on the device; more = some ops fell back to the CPU). PyTorch runs in a subprocess that
loads no GPU build of GGML: PyTorch's CUDA libraries and a CUDA build of GGML in one process abort it
("free(): invalid pointer", seen on the H200 machine with torch 2.11+cu130 and CUDA 13.0).

    python benchmarks/bench_gpt_gpu.py --device cuda:0 --threads 16 --steps 20 [--configs w2 big]
"""

import argparse
import json
import subprocess
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gpt  # noqa: E402
from common import median_ms, print_table  # noqa: E402

import ggrad  # noqa: E402
from ggrad.autograd import execution  # noqa: E402

from gpt_torch import CONFIGS  # noqa: E402


def ggrad_step_fn(cfg, device):
    return bench_gpt.ggrad_step_fn(device, cfg), ggrad.device(device)


def torch_ms(config, steps):
    """PyTorch's median step time on cuda:0, measured in a subprocess (nan without torch or CUDA)."""
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
            f"import bench_gpt_gpu_torch as b; b.main({config!r}, {steps})")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)["ms"]
    print(f"PyTorch run failed (exit {r.returncode}): {r.stderr.strip()[-500:]}", file=sys.stderr)
    return float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--configs", nargs="+", default=["w2"], choices=sorted(CONFIGS))
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args()
    ggrad.set_num_threads(args.threads)
    rows = []
    for name in args.configs:
        cfg = CONFIGS[name]
        tokens = cfg["batch"] * cfg["context"]
        step, dev = ggrad_step_fn(cfg, args.device)
        before = ggrad.stats()["computes"]
        step()
        step()
        per_step = (ggrad.stats()["computes"] - before) / 2
        g_ms = median_ms(step, warmup=3, repeats=args.steps)
        sched = execution.runtime(dev).scheduler
        splits = sched.n_splits if sched is not None else -1
        t_ms = float("nan") if args.no_torch else torch_ms(name, args.steps)
        rows.append({"config": name, "ggrad tok/s": f"{tokens / g_ms * 1e3:,.0f}",
                     "torch tok/s": f"{tokens / t_ms * 1e3:,.0f}", "ggrad ms": f"{g_ms:.1f}",
                     "torch ms": f"{t_ms:.1f}", "ratio ggrad/torch": f"{t_ms / g_ms:.2f}",
                     "computes/step": f"{per_step:g}", "sched splits": splits})
        execution.reset_pools()
    print_table(f"char-GPT training step: ggrad on {args.device} ({ggrad.device(args.device).description}, "
                f"CPU threads {args.threads}) vs PyTorch cuda:0 eager f32; median of {args.steps}", rows,
                list(rows[0]))


if __name__ == "__main__":
    main()
