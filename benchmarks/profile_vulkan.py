"""Where a GPT training step's time goes on GGML's Vulkan backend: the GPU time of each op, read from GGML's
own timestamp queries (GGML_VK_PERF_LOGGER, which times each node on the GPU between its neighbours: no
synchronisation per node, nothing added to the step but the queries).

The step (bench_gpt's, eager) runs in a child process with the logger on; GGML prints one table per graph
computed, and this averages those of the last --steps steps after --warmup, then sums them by op (products by
shape, since their times differ most). Fused nodes are named as GGML fuses them.

    python benchmarks/profile_vulkan.py [--device vulkan:0] [--config big] [--autocast f16|bf16] [--top 40]
"""

import argparse
import collections
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# one line of GGML's table: "NAME: COUNT x MEAN us = TOTAL us [(... GFLOPS/s)]"
LINE = re.compile(r"^(?P<name>.+): (?P<count>\d+) x [\d.]+ us = (?P<total>[\d.]+) us")


def child(args):
    import bench_gpt
    from gpt_torch import CONFIGS
    step = bench_gpt.ggrad_step_fn(args.device, CONFIGS[args.config], args.autocast)
    for _ in range(args.warmup + args.steps):
        step()
        print("=== step", file=sys.stderr, flush=True)


def tables(stderr, steps):
    """The per-op tables GGML printed during the last `steps` steps: {name: (launches, us)} each."""
    blocks = stderr.split("=== step")
    found = []
    for block in blocks[-steps - 1:-1]:
        table = {}
        for line in block.splitlines():
            m = LINE.match(line.strip())
            if m:
                count, total = table.get(m["name"], (0, 0.0))
                table[m["name"]] = (count + int(m["count"]), total + float(m["total"]))
        found.append(table)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="vulkan:0")
    parser.add_argument("--config", default="big")
    parser.add_argument("--autocast", choices=["f16", "bf16"], default=None)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    env = dict(os.environ, GGML_VK_PERF_LOGGER="1", GGML_VK_PERF_LOGGER_FREQUENCY="1")
    run = subprocess.run([sys.executable, __file__, "--child", *sys.argv[1:]], env=env, capture_output=True,
                         text=True)
    if run.returncode != 0:
        sys.exit(f"profile_vulkan: the step failed (exit {run.returncode}):\n{run.stderr[-3000:]}")
    steps = [t for t in tables(run.stderr, args.steps) if t]
    if not steps:
        sys.exit("profile_vulkan: GGML printed no timings (a Vulkan device? GGML_VK_PERF_LOGGER read?)")
    by_name, by_op = collections.Counter(), collections.Counter()
    launches_name, launches_op = collections.Counter(), collections.Counter()
    for table in steps:
        for name, (count, us) in table.items():
            op = name.split(" ")[0]
            by_name[name] += us / len(steps)
            by_op[op] += us / len(steps)
            launches_name[name] += count / len(steps)
            launches_op[op] += count / len(steps)
    total = sum(by_op.values())
    print(f"{args.config} step ({args.autocast or 'f32'}) on {args.device}: GPU time of its nodes "
          f"{total / 1e3:.2f} ms a step, {sum(launches_op.values()):.0f} nodes (mean of {len(steps)} steps)")
    print("\nby op: ms a step, share, nodes")
    for op, us in by_op.most_common():
        print(f"  {op:<28}{us / 1e3:8.3f} {100 * us / total:6.1f}% {launches_op[op]:6.0f}")
    print(f"\ntop {args.top} by name: ms a step, nodes, name")
    for name, us in by_name.most_common(args.top):
        print(f"  {us / 1e3:8.3f} {launches_name[name]:6.0f}  {name}")


if __name__ == "__main__":
    main()
