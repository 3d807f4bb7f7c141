"""MLP 784-512-512-10 (ReLU), batch 128, AdamW: training step time of ggrad and PyTorch CPU, same threads.

    python benchmarks/bench_mlp.py [--threads 1 2] [--steps 20]
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median_ms, print_table, set_threads  # noqa: E402

import ggrad  # noqa: E402
from ggrad import nn, optim  # noqa: E402

SIZES = (784, 512, 512, 10)
BATCH = 128


def make_data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH)
    return x, y


def ggrad_step_fn(x_np, y_np):
    layers = []
    for i in range(len(SIZES) - 1):
        layers.append(nn.Linear(SIZES[i], SIZES[i + 1]))
        if i < len(SIZES) - 2:
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers)
    opt = optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        x, y = ggrad.tensor(x_np), ggrad.tensor(y_np)
        loss = ggrad.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def torch_step_fn(x_np, y_np):
    import torch
    layers = []
    for i in range(len(SIZES) - 1):
        layers.append(torch.nn.Linear(SIZES[i], SIZES[i + 1]))
        if i < len(SIZES) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    x, y = make_data()
    rows = []
    for threads in args.threads:
        set_threads(threads)
        g_ms = median_ms(ggrad_step_fn(x, y), repeats=args.steps)
        try:
            t_ms = median_ms(torch_step_fn(x, y), repeats=args.steps)
        except ImportError:
            t_ms = float("nan")
        rows.append({"threads": threads, "ggrad ms/step": f"{g_ms:.2f}", "torch ms/step": f"{t_ms:.2f}",
                     "ratio (torch/ggrad, >1 = ggrad faster)": f"{t_ms / g_ms:.2f}"})
    print_table(f"MLP {'-'.join(map(str, SIZES))} ReLU, batch {BATCH}, AdamW (median of {args.steps} steps)",
                rows, list(rows[0]))


if __name__ == "__main__":
    main()
