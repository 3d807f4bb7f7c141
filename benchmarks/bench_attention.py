"""Attention forward + backward on the CPU: ggrad's flash attention kernels vs ggrad's composed GGML ops vs
PyTorch's F.scaled_dot_product_attention, side by side, causal, q/k/v (B, H, T, D) float32 (or --dtype bf16).

Each row runs in a fresh process (so that the peak resident memory it reports is its own): the median time of
sdpa forward + backward (the sum of the output times a fixed gradient), and the resident set's growth from
before the inputs are made to its peak over the steps (the T x T scores of the composed paths show here);
for ggrad also the peak of its compute buffers (`ggrad.stats()`).

    python benchmarks/bench_attention.py [--threads 2] [--seqs 256 1024] [--dim 64] [--batch 4] [--heads 8]
"""

import argparse
import json
import os
import resource
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median_ms, print_table  # noqa: E402


def _rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(impl, seq, dim, batch, heads, threads, steps, dtype):
    """One measurement, printed as JSON: ms, peak resident growth MiB (and ggrad's compute peak)."""
    import numpy as np
    rng = np.random.default_rng(0)
    shape = (batch, heads, seq, dim)
    arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]
    result = {}
    if impl == "torch":
        import torch
        torch.set_num_threads(threads)
        before = _rss_mib()
        half = torch.bfloat16 if dtype == "bf16" else torch.float32
        q, k, v = (torch.tensor(a).to(half).requires_grad_() for a in arrays[:3])
        g = torch.tensor(arrays[3])

        def step():
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            (out.float() * g).sum().backward()
            q.grad = k.grad = v.grad = None
    else:
        import dataclasses
        import ggrad
        from ggrad.autograd import execution, lowering
        ggrad.set_num_threads(threads)
        before = _rss_mib()
        cpu = ggrad.device("cpu")
        choices = dataclasses.replace(lowering.CPU, attention="kernel" if impl == "ggrad kernel" else "ggml")
        forced = execution.forced_lowering(cpu, choices)
        forced.__enter__()
        q, k, v = (ggrad.tensor(a, requires_grad=True) for a in arrays[:3])
        g = ggrad.tensor(arrays[3])

        def step():
            args = [t.to(ggrad.bfloat16) if dtype == "bf16" else t for t in (q, k, v)]
            out = ggrad.nn.functional.scaled_dot_product_attention(*args, is_causal=True)
            (out.float() * g).sum().backward()
            ggrad.realize()
            q.grad = k.grad = v.grad = None
    result["ms"] = median_ms(step, warmup=2, repeats=steps)
    result["rss_mib"] = _rss_mib() - before
    if impl != "torch":
        import ggrad
        result["ggrad_peak_mib"] = ggrad.stats()["memory"].get(ggrad.device("cpu").name, {}).get("peak", float("nan")) / 2 ** 20
    print(json.dumps(result))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seqs", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.dim, args.batch, args.heads, args.threads, args.steps, args.dtype)
        return
    rows = []
    for seq in args.seqs:
        runs = {}
        for impl in ("ggrad kernel", "ggrad composed", "torch"):
            cmd = [sys.executable, __file__, "--child", impl, str(seq), "--dim", str(args.dim), "--batch",
                   str(args.batch), "--heads", str(args.heads), "--threads", str(args.threads), "--steps",
                   str(args.steps), "--dtype", args.dtype]
            done = subprocess.run(cmd, capture_output=True, text=True)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if not lines:
                print(f"{impl} T={seq} failed: {done.stderr[-800:]}", file=sys.stderr)
                continue
            runs[impl] = json.loads(lines[-1])
        for impl, r in runs.items():
            rows.append({"T": seq, "path": impl, "ms fwd+bwd": f"{r['ms']:.2f}",
                         "vs torch": f"{runs['torch']['ms'] / r['ms']:.2f}" if "torch" in runs else "-",
                         "peak RSS growth MiB": f"{r['rss_mib']:.0f}",
                         "ggrad compute peak MiB": f"{r['ggrad_peak_mib']:.1f}" if "ggrad_peak_mib" in r else "-"})
    print_table(f"causal attention forward + backward, B={args.batch} H={args.heads} D={args.dim} {args.dtype}, "
                f"{args.threads} threads (median of {args.steps}; 'vs torch' > 1 is faster than PyTorch)",
                rows, list(rows[0]))


if __name__ == "__main__":
    main()
