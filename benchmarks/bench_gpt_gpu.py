"""Workload W2 on a GPU: char-GPT training step, ggrad on a GGML device vs PyTorch on CUDA, in one run.

The same model and step as bench_gpt.py (vocab 96, pre-LN GELU blocks, tied embeddings, AdamW), at W2's
size and optionally at a larger one. PyTorch runs eager f32 (TF32 off, its default for matmul), on
`cuda:0`. Both steps end in `loss.item()`, which waits for the GPU. Prints tokens/s (median of --steps
steps after warm-up), the ratio, and how many pieces GGML's scheduler split ggrad's step into
(1 = all on the device; more = some ops fell back to the CPU), and the peak device memory of each:
ggrad's as the device's free memory before the model minus its least during the steps (everything the
process holds there, GGML's and CUDA's own included) and as `ggrad.stats()`'s peak (the step's compute
buffer and persistent tensors, the measure PyTorch's allocation compares with), PyTorch's as
its allocator's peak reservation (`torch.cuda.max_memory_reserved`) and peak allocation
(`max_memory_allocated`). GGML's cuBLAS calls compute f32 products in TF32; `--tf32` times PyTorch that way
too, beside its default. `--torch-variants sdpa compile` adds PyTorch with F.scaled_dot_product_attention
(flash attention) and that under torch.compile (TF32 where --tf32). `--autocast f16|bf16` runs both
under autocast (ggrad.autocast / torch.autocast; f16 with each one's GradScaler). With `--device cpu`
PyTorch runs on the CPU too (a check of the script; no memory figures). PyTorch runs in a subprocess that
loads no GPU build of GGML: PyTorch's CUDA libraries and a CUDA build of GGML in one process abort it
("free(): invalid pointer", seen on the H200 machine with torch 2.11+cu130 and CUDA 13.0).

    python benchmarks/bench_gpt_gpu.py --device cuda:0 --threads 16 --steps 20 [--configs w2 big] [--autocast f16]
                                       [--replay]
    python benchmarks/bench_gpt_gpu.py --device cpu --threads 2 --steps 5 --configs tiny --autocast bf16
"""

import argparse
import gc
import json
import subprocess
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gpt  # noqa: E402
from common import median_ms, print_table  # noqa: E402

import ggrad  # noqa: E402
from ggrad.autograd import memory  # noqa: E402

from gpt_torch import CONFIGS  # noqa: E402


def ggrad_step_fn(cfg, device, autocast=None, replay=False):
    return bench_gpt.ggrad_step_fn(device, cfg, autocast, replay), ggrad.device(device)


def torch_run(config, steps, autocast, device, tf32=False, variant="eager"):
    """PyTorch's median step time, peak reserved and peak allocated MiB, measured in a subprocess (nan without
    torch or CUDA)."""
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
            f"import bench_gpt_gpu_torch as b; "
            f"b.main({config!r}, {steps}, {autocast!r}, {device!r}, {tf32}, {variant!r})")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            result = json.loads(line)
            return result["ms"], result["peak_mib"], result["alloc_mib"]
    print(f"PyTorch run failed (exit {r.returncode}): {r.stderr.strip()[-500:]}", file=sys.stderr)
    return (float("nan"),) * 3


def timed_with_memory(step, dev, steps):
    """(median ms, peak MiB used on `dev` since before the model was made, nan on the CPU)."""
    least = [dev.free_memory]

    def watched():
        step()
        least[0] = min(least[0], dev.free_memory)
    return median_ms(watched, warmup=3, repeats=steps), least


def stats_peak_mib(dev):
    """ggrad.stats()'s peak on `dev` since the last reset, in MiB (nan where it has none)."""
    return ggrad.stats()["memory"].get(dev.name, {}).get("peak", float("nan")) / 2 ** 20


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--configs", nargs="+", default=["w2"], choices=sorted(CONFIGS))
    parser.add_argument("--autocast", choices=["f16", "bf16"], help="mixed precision (default: float32)")
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--torch-variants", nargs="*", default=[], choices=["sdpa", "compile"],
                        help="also time PyTorch with F.scaled_dot_product_attention (is_causal), and that under "
                             "torch.compile (gpt_torch.VARIANTS), each beside the eager step")
    parser.add_argument("--replay", action="store_true",
                        help="also time ggrad's step through ggrad.compile_step (recorded once, then replayed: no op "
                             "recorded in Python), its peak beside")
    parser.add_argument("--tf32", action="store_true",
                        help="also time PyTorch with TF32 products, as GGML's CUDA backend always computes f32 ones")
    args = parser.parse_args()
    ggrad.set_num_threads(args.threads)
    dev = ggrad.device(args.device)
    torch_device = "cpu" if dev.is_cpu else "cuda"
    rows = []
    for name in args.configs:
        cfg = CONFIGS[name]
        tokens = cfg["batch"] * cfg["context"]
        dev.backend   # started before the baseline, so that its own context does not count
        free_before = dev.free_memory
        step, dev = ggrad_step_fn(cfg, args.device, args.autocast)
        before = ggrad.stats()["computes"]
        step()
        step()
        per_step = (ggrad.stats()["computes"] - before) / 2
        g_ms, least = timed_with_memory(step, dev, args.steps)
        g_peak = float("nan") if dev.is_cpu else (free_before - least[0]) / 2 ** 20
        stats_peak = stats_peak_mib(dev)
        sched = memory.runtime(dev).scheduler
        splits = sched.n_splits if sched is not None else -1
        replayed = None
        if args.replay:   # the eager model's memory given back, then the replayed step's own measured
            del step
            gc.collect()
            memory.reset_pools()
            step, dev = ggrad_step_fn(cfg, args.device, args.autocast, replay=True)
            step()   # recorded: the replayed graph's buffer replaces the scheduler's, which the eager step held
            memory.stats.reset_peaks()
            r_ms, r_least = timed_with_memory(step, dev, args.steps)
            replayed = (r_ms, float("nan") if dev.is_cpu else (free_before - r_least[0]) / 2 ** 20,
                        stats_peak_mib(dev))
        nan3 = (float("nan"),) * 3
        t_ms, t_peak, t_alloc = nan3 if args.no_torch else torch_run(name, args.steps, args.autocast, torch_device)
        row = {"config": name, "ggrad tok/s": f"{tokens / g_ms * 1e3:,.0f}",
               "torch tok/s": f"{tokens / t_ms * 1e3:,.0f}", "ggrad ms": f"{g_ms:.1f}",
               "torch ms": f"{t_ms:.1f}", "ratio ggrad/torch": f"{t_ms / g_ms:.2f}"}
        if replayed is not None:
            row.update({"replayed ms": f"{replayed[0]:.1f}", "ratio replayed/torch": f"{t_ms / replayed[0]:.2f}",
                        "replayed peak MiB": f"{replayed[1]:,.0f}", "replayed stats peak MiB": f"{replayed[2]:,.1f}"})
        if args.tf32:
            tf32_ms = nan3[0] if args.no_torch else torch_run(name, args.steps, args.autocast, torch_device, True)[0]
            row.update({"torch TF32 ms": f"{tf32_ms:.1f}", "ratio TF32": f"{tf32_ms / g_ms:.2f}"})
        for variant in args.torch_variants:
            v_ms = nan3[0] if args.no_torch else torch_run(name, args.steps, args.autocast, torch_device,
                                                          args.tf32, variant)[0]
            row.update({f"torch {variant} ms": f"{v_ms:.1f}", f"ratio {variant}": f"{v_ms / g_ms:.2f}"})
        row.update({"ggrad peak MiB": f"{g_peak:,.0f}", "ggrad stats peak MiB": f"{stats_peak:,.1f}",
                    "torch peak MiB": f"{t_peak:,.0f}",
                    "torch alloc MiB": f"{t_alloc:,.1f}", "computes/step": f"{per_step:g}", "sched splits": splits})
        rows.append(row)
        memory.reset_pools()
    precision = f"autocast {args.autocast}" if args.autocast else "f32"
    print_table(f"char-GPT training step ({precision}): ggrad on {args.device} ({dev.description}, CPU threads "
                f"{args.threads}) vs PyTorch {torch_device} eager; median of {args.steps}", rows, list(rows[0]))


if __name__ == "__main__":
    main()
