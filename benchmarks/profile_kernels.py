"""Where a GPT training step's GPU time goes, kernel by kernel, without synchronising between nodes: CUPTI's
activity records (benchmarks/kernel_trace.c, built as a shared library) over --steps plain steps, CUDA graphs
and all, summed by kernel name and by a rough kind (product, cast, elementwise, ...). Beside them the step's
median wall time, the span from the first kernel's start to the last one's end, and the GPU's idle time
between kernels (gaps over 20 us apart: host time between graphs or launches, not the graphs' own seams), and
how many launches came from CUDA graphs, and the host's own time a step (the main thread's CPU time outside
GGML's compute, common.HostCPU): what the GPU waits for between steps.

    python benchmarks/profile_kernels.py --trace kernel_trace.so [--config big] [--autocast f16] [--steps 5]
    python benchmarks/profile_kernels.py --trace kernel_trace.so --generate small   # a decoded token instead

With --generate, a "step" is one greedy `generate` of bench_generate.py's char-GPT (its KV cache, the decode
step replayed per token) and the figures are per decoded token.
"""

import argparse
import collections
import ctypes
import os
import re
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gpt  # noqa: E402
from common import HostCPU, set_threads  # noqa: E402
from gpt_torch import CONFIGS  # noqa: E402

from ggrad.ggml.sched import Scheduler  # noqa: E402

# the first pattern that a kernel's name matches gives its kind
KINDS = [
    ("ggrad flash attention", r"flash"),
    ("ggrad layer norm", r"layer_norm"),
    ("ggrad gelu", r"gelu_tanh"),
    ("ggrad other", r"ggrad"),
    ("concat", r"concat"),
    ("embedding gradient", r"rows_back"),
    ("product (cuBLAS)", r"gemm|xmma|cutlass|sm90_|sm80_|nvjet|cublas"),
    ("mul_mat (GGML)", r"mul_mat|mmq|mmv|mmf"),
    ("cast/copy", r"cpy|convert|copy"),
    ("AdamW", r"adamw"),
    ("cross-entropy", r"cross_entropy"),
    ("sum/reduce", r"sum|reduce|repeat_back|mean"),
    ("binary elementwise", r"bin_bcast|op_add|op_mul|op_sub|op_div|add|mul|scale"),
    ("unary elementwise", r"unary|op_|sqr|sqrt|abs|sgn|neg|step|clamp|exp|log|relu|tanh|silu"),
    ("get_rows / set", r"get_rows|set_rows|fill|memset"),
    ("memcpy", r"\[memcpy\]"),
    ("softmax", r"soft_max"),
    ("norm (GGML)", r"norm"),
]


def kind_of(name):
    for kind, pattern in KINDS:
        if re.search(pattern, name, re.IGNORECASE):
            return kind
    return "other"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", required=True, help="kernel_trace.c built as a shared library")
    parser.add_argument("--config", default="big", choices=sorted(CONFIGS))
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--autocast", choices=["f16", "bf16"], help="mixed precision (default: float32)")
    parser.add_argument("--generate", choices=["small", "large"],
                        help="profile a decoded token of bench_generate.py's config instead of a training step")
    args = parser.parse_args()
    set_threads(args.threads)
    if args.generate:
        step, tokens = decode_fn(args.device, args.generate)
    else:
        step, tokens = bench_gpt.ggrad_step_fn(args.device, CONFIGS[args.config], args.autocast), 1
    for _ in range(5):
        step()
    walls, hosts = [], []
    host = HostCPU(Scheduler)
    for _ in range(args.steps):
        start = time.perf_counter()
        with host:
            step()
        walls.append(time.perf_counter() - start)
        hosts.append(host.seconds)
    trace = ctypes.CDLL(args.trace)
    trace.kernel_trace_stop.argtypes = [ctypes.c_char_p]
    error = trace.kernel_trace_start()
    if error:
        sys.exit(f"CUPTI refused the activity records (error {error})")
    for _ in range(args.steps):
        step()
    per_step = args.steps * tokens   # the figures are a step's (a token's)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.tsv")
        trace.kernel_trace_stop(path.encode())
        lines = open(path).read().splitlines()
    _, span_ns, dropped = lines[0].split("\t")
    _, gap_ns, long_gaps, long_gap_ns = lines[1].split("\t")
    kernels = []
    in_graphs = 0
    for line in lines[2:]:
        ns, launches, graphed, name = line.split("\t", 3)
        kernels.append((int(ns) / per_step / 1e6, int(launches) // per_step, name))
        in_graphs += int(graphed)
    kernels.sort(reverse=True)
    busy = sum(ms for ms, _, _ in kernels)
    launches = sum(n for _, n, _ in kernels)
    precision = f"autocast {args.autocast}" if args.autocast else "float32"
    what = f"decoded token ({args.generate})" if args.generate else f"{args.config} {precision} step"
    print(f"{what} on {args.device}: median wall {statistics.median(walls) * 1e3 / tokens:.3f} ms, "
          f"host {statistics.median(hosts) * 1e3 / tokens:.3f} ms (main thread's CPU outside GGML's compute); "
          f"per step: kernels busy {busy:.2f} ms, {launches} launches ({in_graphs / per_step:.0f} from CUDA "
          f"graphs), span {int(span_ns) / per_step / 1e6:.3f} ms, GPU idle in it {int(gap_ns) / per_step / 1e6:.3f} ms, "
          f"of which {int(long_gap_ns) / per_step / 1e6:.3f} ms in {int(long_gaps) / per_step:.1f} gaps over 20 us "
          f"(names dropped: {dropped})")
    by_kind = collections.defaultdict(lambda: [0.0, 0])
    for ms, launches, name in kernels:
        by_kind[kind_of(name)][0] += ms
        by_kind[kind_of(name)][1] += launches
    print("\nby kind: ms a step, share of busy, launches")
    for kind, (ms, launches) in sorted(by_kind.items(), key=lambda item: -item[1][0]):
        print(f"  {kind:24s} {ms:8.3f} {ms / busy:6.1%} {launches:6d}")
    print(f"\ntop {args.top} kernels: ms a step, launches, name")
    for ms, launches, name in kernels[:args.top]:
        print(f"  {ms:8.3f} {launches:5d}  {name[:150]}")


def decode_fn(device, config):
    """A greedy generate of bench_generate.py's `config` char-GPT on `device` (its decode session recorded by
    the warm-up calls), and the tokens it decodes."""
    import bench_generate
    from generate_torch import CONFIGS as DECODE_CONFIGS
    cfg = DECODE_CONFIGS[config]
    return bench_generate.ggrad_run(cfg, True, device, 1), cfg["context"] - cfg["prompt"]


if __name__ == "__main__":
    main()
