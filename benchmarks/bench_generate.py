"""Generation throughput of the char-GPT: tokens/s with and without the KV cache, ggrad vs PyTorch.

Greedy decoding of --batch sequences: a short prompt, then new tokens until the context is full, so every
cached step is one position and every uncached step re-runs the whole prefix. ggrad's cached steps are
replays of one recorded decode step (argmax in its graph); PyTorch runs the same architecture (random
weights) in eager mode, argmax on its tensors, its cache concatenating keys and values per step
(torch.cat) as PyTorch decoders commonly do. Medians of --repeats runs; tokens/s counts the tokens of
all sequences; on the CPU the two frameworks run in turns (one generate of each per round) and the ratio is
the median of the rounds' ratios. "host ms/tok": ggrad's main-thread CPU time per new token (all sequences)
outside GGML's compute, with the cache (common.HostCPU, as bench_record measures), over a whole generate
(recording its prompt step and its decode step included); "host ms/replayed tok": the same for the tokens
that replay the decode step.

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
import statistics
import subprocess
import sys
import time

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


def ggrad_run(cfg, use_cache, device, batch, stream=False):
    ggrad.manual_seed(0)
    model = CharGPT(cfg["vocab"], cfg["d_model"], cfg["layers"], cfg["heads"], cfg["context"]).to(device)
    prompt = np.repeat(np.arange(cfg["prompt"], dtype=np.int32)[None] % cfg["vocab"], batch, axis=0)
    n = cfg["context"] - cfg["prompt"]
    return lambda: model.generate(prompt, n, temperature=0, use_cache=use_cache, stream=stream)


def host_ms_per_token(run, tokens, repeats):
    """Median main-thread CPU ms per token outside GGML's compute (HOST) of `run()`."""
    times = []
    for _ in range(repeats):
        with HOST:
            run()
        times.append(HOST.seconds / tokens * 1e3)
    return sorted(times)[len(times) // 2]


def replayed_host_ms(cfg, device, batch, repeats):
    """Median HOST ms per token of the tokens that replay the decode step (a streamed generate, after its
    prompt step and the recording of the decode step)."""
    times = []
    for _ in range(repeats):
        tokens = ggrad_run(cfg, True, device, batch, stream=True)()
        next(tokens), next(tokens)
        with HOST:
            n = sum(1 for _ in tokens)
        times.append(HOST.seconds / (n * batch) * 1e3)
    return sorted(times)[len(times) // 2]


def alternating(runs, repeats):
    """Seconds of each of `runs` (callables) timed in turns, one of each per round, after a warm-up of each:
    load that comes and goes falls on them alike. Returns per run the list of its rounds' times."""
    for run in runs:
        run()
    times = [[] for _ in runs]
    for _ in range(repeats):
        for run, mine in zip(runs, times):
            t0 = time.perf_counter()
            run()
            mine.append(time.perf_counter() - t0)
    return times


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
            if args.device.startswith("cpu"):   # both in this process, timed in turns
                runs = [run]
                try:
                    runs.append(generate_torch.torch_run(cfg, use_cache, batch=args.batch))
                except ImportError:
                    pass
                times = alternating(runs, args.repeats)
                g = n / statistics.median(times[0])
                t = n / statistics.median(times[1]) if len(times) > 1 else math.nan
                ratio = statistics.median(tt / gg for gg, tt in zip(*times)) if len(times) > 1 else math.nan
            else:
                g = n / median_s(run, args.repeats)
                t = torch_tokens_per_s(name, use_cache, args.repeats, args.device, args.batch)
                ratio = g / t
            row[f"ggrad {key} tok/s"] = f"{g:,.0f}"
            row[f"torch {key} tok/s"] = f"{t:,.0f}"
            row[f"ratio {key}"] = f"{ratio:.2f}"
            row[f"_{key}"] = g
        if not args.cached_only:
            row["ggrad cache speed-up"] = f"{row['_cache'] / row['_no cache']:.1f}x"
        row["ggrad host ms/tok"] = f"{host_ms_per_token(run, n, args.repeats):.3f}"
        row["host ms/replayed tok"] = f"{replayed_host_ms(cfg, args.device, args.batch, args.repeats):.3f}"
        rows.append(row)
    columns = [c for c in rows[0] if not c.startswith("_")]
    device = ggrad.device(args.device)
    attention = lowering.for_device(device).decode_attention
    print_table(f"char-GPT greedy generation, batch {args.batch}, {args.device} ({device.description}; decode "
                f"attention {attention}; median of {args.repeats}, ggrad and torch in turns; ratio = median of "
                f"the rounds' ggrad / torch)",
                rows, columns)


if __name__ == "__main__":
    main()
