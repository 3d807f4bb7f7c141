"""Generation throughput of the char-GPT: tokens/s with and without the KV cache, ggrad vs PyTorch.

Greedy decoding (sampling is host numpy either way) of batch 1: a short prompt, then new tokens until
the context is full, so every cached step is one position and every uncached step re-runs the whole
prefix. PyTorch runs the same architecture (random weights) in eager mode, its cache concatenating
keys and values per step (torch.cat) as PyTorch decoders commonly do. Medians of --repeats runs.

    python benchmarks/bench_generate.py [--configs small large] [--repeats 5] [--threads 2]
    python benchmarks/bench_generate.py --device cuda:0      # PyTorch on CUDA, in its own process

On a GPU, PyTorch runs in a child process (a process must not hold both PyTorch's CUDA and GGML's).
"""

import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import print_table, set_threads  # noqa: E402
import generate_torch  # noqa: E402
from generate_torch import CONFIGS, median_s  # noqa: E402

import ggrad  # noqa: E402
from ggrad.examples.char_gpt import CharGPT  # noqa: E402

def ggrad_run(cfg, use_cache, device):
    ggrad.manual_seed(0)
    model = CharGPT(cfg["vocab"], cfg["d_model"], cfg["layers"], cfg["heads"], cfg["context"]).to(device)
    prompt = np.arange(cfg["prompt"], dtype=np.int32)[None] % cfg["vocab"]
    n = cfg["context"] - cfg["prompt"]
    return lambda: model.generate(prompt, n, temperature=0, use_cache=use_cache)


def torch_tokens_per_s(name, use_cache, repeats, device):
    """PyTorch's tokens/s, here on the CPU, in a child process on a GPU; nan without PyTorch."""
    cfg = CONFIGS[name]
    n = cfg["context"] - cfg["prompt"]
    if device.startswith("cpu"):
        try:
            return n / median_s(generate_torch.torch_run(cfg, use_cache), repeats)
        except ImportError:
            return math.nan
    child = subprocess.run([sys.executable, generate_torch.__file__, name, str(int(use_cache)), str(repeats)],
                           capture_output=True, text=True)
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
    args = parser.parse_args()
    if args.threads and args.device.startswith("cpu"):
        set_threads(args.threads)
    elif args.threads:   # on a GPU PyTorch lives in the child: this process must not import it
        ggrad.set_num_threads(args.threads)
    rows = []
    for name in args.configs:
        cfg = CONFIGS[name]
        n = cfg["context"] - cfg["prompt"]
        row = {"config": f"{name}: d{cfg['d_model']} L{cfg['layers']} ctx{cfg['context']}", "new tokens": n}
        for use_cache in (False, True):
            key = "cache" if use_cache else "no cache"
            g = n / median_s(ggrad_run(cfg, use_cache, args.device), args.repeats)
            t = torch_tokens_per_s(name, use_cache, args.repeats, args.device)
            row[f"ggrad {key} tok/s"] = f"{g:,.0f}"
            row[f"torch {key} tok/s"] = f"{t:,.0f}"
            row[f"ratio {key}"] = f"{g / t:.2f}"
            row[f"_{key}"] = g
        row["ggrad cache speed-up"] = f"{row['_cache'] / row['_no cache']:.1f}x"
        rows.append(row)
    columns = [c for c in rows[0] if not c.startswith("_")]
    where = ggrad.device(args.device).description
    print_table(f"char-GPT greedy generation, batch 1, {args.device} ({where}; median of {args.repeats}; "
                "ratio = ggrad / torch)",
                rows, columns)


if __name__ == "__main__":
    main()
