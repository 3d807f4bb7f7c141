"""A/B timing of the GPT training step: two or more variants measured in alternating processes.

A variant is a source tree of ggrad (a checkout or a `git archive` of a commit, with the compiled
ggrad/ggml/_ffi.abi3.so beside it) and optionally lowering choices set over the device's own, `TREE` or
`TREE:field=value,...`, e.g. `.:strided_matmul=none`, or on a GPU `.:weight_grad=mul_mat`. Each round
runs every variant once, in its own process (its own graph cache), and takes the median of --steps steps
after warm-up; the report gives each variant's median over the rounds. On a shared machine the
alternation spreads the load over all variants alike.

    python benchmarks/ab_step.py /work/main . --rounds 5 --steps 10 [--threads 2] [--config w2]
    python benchmarks/ab_step.py . .:weight_grad=mul_mat --device cuda:0 --config big --threads 16
    python benchmarks/ab_step.py /tmp/before . --device cuda:0 --config big --autocast f16
"""

import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import dataclasses, sys
sys.path.insert(1, {here!r})
import ggrad
from ggrad.autograd import execution, lowering
import bench_gpt
from common import median_ms
from gpt_torch import CONFIGS
ggrad.set_num_threads({threads})
dev = ggrad.device({device!r})
choices = dataclasses.replace(lowering.for_device(dev), **{choices})
with execution.forced_lowering(dev, choices):
    step = bench_gpt.ggrad_step_fn({device!r}, CONFIGS[{config!r}], {autocast!r})
    print(median_ms(step, warmup=3, repeats={steps}))
"""


def parse_variant(text):
    tree, _, rest = text.partition(":")
    choices = {}
    for item in filter(None, rest.split(",")):
        field, _, value = item.partition("=")
        choices[field] = {"True": True, "False": False}.get(value, value)
    return os.path.abspath(tree), choices


def run(tree, choices, args):
    code = CHILD.format(here=HERE, threads=args.threads, choices=choices, config=args.config, steps=args.steps,
                        device=args.device, autocast=args.autocast)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tree, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"variant {tree} {choices} failed:\n{out.stderr}")
    return float(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="+", help="TREE or TREE:field=value,...")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--autocast", choices=["f16", "bf16"], help="mixed precision (default: float32)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--config", default="w2")
    parser.add_argument("--device", default="cpu", help="the device of the step (its own lowering, then the variant's)")
    args = parser.parse_args()
    variants = [parse_variant(v) for v in args.variants]
    times = [[] for _ in variants]
    for r in range(args.rounds):
        for i, (tree, choices) in enumerate(variants):
            times[i].append(run(tree, choices, args))
        print(f"round {r + 1}: " + "  ".join(f"{t[-1]:.1f}" for t in times), flush=True)
    precision = f"autocast {args.autocast}" if args.autocast else "float32"
    print(f"\n{args.config} {precision} step ms on {args.device}, median of {args.rounds} rounds (each the median of "
          f"{args.steps} steps), {args.threads} threads")
    for text, t in zip(args.variants, times):
        print(f"  {statistics.median(t):8.1f}  {text}   (all: {', '.join(f'{x:.0f}' for x in t)})")


if __name__ == "__main__":
    main()
