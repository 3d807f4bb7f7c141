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
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import print_table, set_threads  # noqa: E402

import ggrad  # noqa: E402
from ggrad.examples.char_gpt import CharGPT  # noqa: E402

CONFIGS = {   # small: the char-GPT example's defaults
    "small": dict(vocab=96, d_model=128, layers=4, heads=4, context=64, prompt=4),
    "large": dict(vocab=96, d_model=256, layers=6, heads=8, context=256, prompt=16),
}


def median_s(run, repeats):
    run()   # warm-up (and the first run's allocations)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def ggrad_run(cfg, use_cache, device):
    ggrad.manual_seed(0)
    model = CharGPT(cfg["vocab"], cfg["d_model"], cfg["layers"], cfg["heads"], cfg["context"]).to(device)
    prompt = np.arange(cfg["prompt"], dtype=np.int32)[None] % cfg["vocab"]
    n = cfg["context"] - cfg["prompt"]
    return lambda: model.generate(prompt, n, temperature=0, use_cache=use_cache)


def torch_run(cfg, use_cache, device="cpu"):
    """The same model and greedy loop in PyTorch (eager, no_grad) on `device` ("cpu" or "cuda")."""
    import torch
    from torch import nn
    d, h, ctx = cfg["d_model"], cfg["heads"], cfg["context"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

        def forward(self, x, cache):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
            if cache is not None:
                if cache:
                    k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
                cache[:] = [k, v]
            a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
            x = x + self.out(a.transpose(1, 2).reshape(b, t, d))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(cfg["vocab"], d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList([Block() for _ in range(cfg["layers"])])
            self.ln_f = nn.LayerNorm(d)

        def forward(self, ids, start, caches):
            x = self.tok(ids) + self.pos(torch.arange(start, start + ids.shape[1]))
            for block, cache in zip(self.blocks, caches):
                x = block(x, cache)
            return self.ln_f(x) @ self.tok.weight.T

    torch.manual_seed(0)
    model = GPT().eval().to(device)
    prompt = (torch.arange(cfg["prompt"])[None] % cfg["vocab"]).to(device)

    def run():
        ids = prompt
        caches = [[] for _ in model.blocks] if use_cache else [None] * len(model.blocks)
        with torch.no_grad():
            while ids.shape[1] < ctx:
                start = ids.shape[1] - 1 if use_cache and caches[0] else 0
                logits = model(ids[:, start:], start, caches)
                ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], 1)
        return ids.cpu()
    return run


def torch_tokens_per_s(name, use_cache, repeats, device):
    """PyTorch's tokens/s, here on the CPU, in a child process on a GPU; nan without PyTorch."""
    cfg = CONFIGS[name]
    n = cfg["context"] - cfg["prompt"]
    if device.startswith("cpu"):
        try:
            return n / median_s(torch_run(cfg, use_cache), repeats)
        except ImportError:
            return math.nan
    child = subprocess.run([sys.executable, __file__, "--torch-child", name, str(int(use_cache)), str(repeats)],
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
    parser.add_argument("--torch-child", nargs=3, metavar=("CONFIG", "CACHE", "REPEATS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_child:
        name, cache, repeats = args.torch_child
        cfg = CONFIGS[name]
        seconds = median_s(torch_run(cfg, bool(int(cache)), "cuda"), int(repeats))
        print(json.dumps({"tok_s": (cfg["context"] - cfg["prompt"]) / seconds}))
        return
    if args.threads:
        set_threads(args.threads)
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
