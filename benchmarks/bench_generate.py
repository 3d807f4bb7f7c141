"""Generation throughput of the char-GPT: tokens/s with and without the KV cache, ggrad vs PyTorch.

Greedy decoding of --batch sequences: a short prompt, then new tokens until the context is full, so every
cached step is one position and every uncached step re-runs the whole prefix. ggrad's cached steps are
replays of one recorded decode step (argmax in its graph); PyTorch runs the same architecture (random
weights) in eager mode, argmax on its tensors, its cache concatenating keys and values per step
(torch.cat) as PyTorch decoders commonly do. Medians of --repeats runs; tokens/s counts the tokens of
all sequences. "host ms/tok": ggrad's main-thread CPU time per new token (all sequences) outside GGML's
compute, with the cache (common.HostCPU, as bench_record measures).

    python benchmarks/bench_generate.py [--configs small large] [--repeats 5] [--threads 2] [--batch 1]
    python benchmarks/bench_generate.py --device cuda:0      # PyTorch on CUDA, in its own process
    python benchmarks/bench_generate.py --decode-attention flash_attn_ext   # force a decode attention path
    python benchmarks/bench_generate.py --batch 8 --cached-only    # skip the (slow) runs without the cache

On a GPU, PyTorch runs in a child process (a process must not hold both PyTorch's CUDA and GGML's).
"""

import argparse
import contextlib
import dataclasses
import json
import math
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import HostCPU, print_table, set_threads  # noqa: E402
import generate_torch  # noqa: E402
from generate_torch import CONFIGS, median_s  # noqa: E402

import ggrad  # noqa: E402
from ggrad.autograd import execution, lowering  # noqa: E402
from ggrad.examples.char_gpt import CharGPT  # noqa: E402
from ggrad.ggml.sched import Scheduler  # noqa: E402

HOST = HostCPU(Scheduler)


def ggrad_run(cfg, use_cache, device, batch):
    ggrad.manual_seed(0)
    model = CharGPT(cfg["vocab"], cfg["d_model"], cfg["layers"], cfg["heads"], cfg["context"]).to(device)
    prompt = np.repeat(np.arange(cfg["prompt"], dtype=np.int32)[None] % cfg["vocab"], batch, axis=0)
    n = cfg["context"] - cfg["prompt"]
    return lambda: model.generate(prompt, n, temperature=0, use_cache=use_cache)


def host_ms_per_token(run, tokens, repeats):
    """Median main-thread CPU ms per token outside GGML's compute (HOST) of `run()`."""
    times = []
    for _ in range(repeats):
        with HOST:
            run()
        times.append(HOST.seconds / tokens * 1e3)
    return sorted(times)[len(times) // 2]


def torch_tokens_per_s(name, use_cache, repeats, device, batch):
    """PyTorch's tokens/s, here on the CPU, in a child process on a GPU; nan without PyTorch."""
    cfg = CONFIGS[name]
    n = (cfg["context"] - cfg["prompt"]) * batch
    if device.startswith("cpu"):
        try:
            return n / median_s(generate_torch.torch_run(cfg, use_cache, batch=batch), repeats)
        except ImportError:
            return math.nan
    child = subprocess.run([sys.executable, generate_torch.__file__, name, str(int(use_cache)), str(repeats),
                            str(batch)], capture_output=True, text=True)
    if child.returncode != 0:
        print(child.stderr[-2000:], file=sys.stderr)
        return math.nan
    return json.loads(child.stdout.strip().splitlines()[-1])["tok_s"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="threads for both (default: each one's choice)")
    parser.add_argument("--device", default="cpu", help="ggrad's device; PyTorch takes cuda when it is a GPU")
    parser.add_argument("--batch", type=int, default=1, help="sequences decoded together")
    parser.add_argument("--decode-attention", choices=["softmax", "flash_attn_ext"], default=None,
                        help="ggrad's decode-step attention (default: the backend's lowering)")
    parser.add_argument("--cached-only", action="store_true", help="only the runs with the KV cache")
    args = parser.parse_args()
    device = ggrad.device(args.device)
    forced = contextlib.nullcontext()
    if args.decode_attention:
        forced = execution.forced_lowering(device, dataclasses.replace(lowering.for_device(device),
                                                                       decode_attention=args.decode_attention))
    with forced:
        run_configs(args)


def run_configs(args):
    if args.threads and args.device.startswith("cpu"):
        set_threads(args.threads)
    elif args.threads:   # on a GPU PyTorch lives in the child: this process must not import it
        ggrad.set_num_threads(args.threads)
    rows = []
    for name in args.configs:
        cfg = CONFIGS[name]
        n = (cfg["context"] - cfg["prompt"]) * args.batch
        row = {"config": f"{name}: d{cfg['d_model']} L{cfg['layers']} ctx{cfg['context']}", "new tokens": n}
        for use_cache in (True,) if args.cached_only else (False, True):
            key = "cache" if use_cache else "no cache"
            run = ggrad_run(cfg, use_cache, args.device, args.batch)
            g = n / median_s(run, args.repeats)
            t = torch_tokens_per_s(name, use_cache, args.repeats, args.device, args.batch)
            row[f"ggrad {key} tok/s"] = f"{g:,.0f}"
            row[f"torch {key} tok/s"] = f"{t:,.0f}"
            row[f"ratio {key}"] = f"{g / t:.2f}"
            row[f"_{key}"] = g
        if not args.cached_only:
            row["ggrad cache speed-up"] = f"{row['_cache'] / row['_no cache']:.1f}x"
        row["ggrad host ms/tok"] = f"{host_ms_per_token(run, n, args.repeats):.3f}"
        rows.append(row)
    columns = [c for c in rows[0] if not c.startswith("_")]
    device = ggrad.device(args.device)
    attention = lowering.for_device(device).decode_attention
    print_table(f"char-GPT greedy generation, batch {args.batch}, {args.device} ({device.description}; decode "
                f"attention {attention}; median of {args.repeats}; ratio = ggrad / torch)",
                rows, columns)


if __name__ == "__main__":
    main()
