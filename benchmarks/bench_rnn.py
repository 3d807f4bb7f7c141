"""LSTM and TransformerEncoder training steps (Adam): step time of ggrad and PyTorch CPU, same threads.

The model code is written once, for PyTorch, and runs with `import ggrad as torch` too.

    python benchmarks/bench_rnn.py [--threads 1 2] [--steps 10] [--seq 32]
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median_ms, print_table, set_threads  # noqa: E402

import ggrad  # noqa: E402

BATCH, FEATURES, HIDDEN = 16, 32, 64


def models(torch):
    nn = torch.nn
    layer = nn.TransformerEncoderLayer(HIDDEN, nhead=4, dim_feedforward=2 * HIDDEN, dropout=0.0, batch_first=True)
    return {
        "LSTM(32, 64, num_layers=2)": nn.LSTM(FEATURES, HIDDEN, num_layers=2, batch_first=True),
        "TransformerEncoder(64, 4 heads, 2 layers)": nn.Sequential(nn.Linear(FEATURES, HIDDEN),
                                                                     nn.TransformerEncoder(layer, 2)),
    }


def step_fn(torch, model, x_np):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        out = model(torch.tensor(x_np))
        out = out[0] if isinstance(out, tuple) else out
        loss = (out * out).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--seq", type=int, default=32)
    args = parser.parse_args()
    x = np.random.default_rng(0).standard_normal((BATCH, args.seq, FEATURES)).astype(np.float32)
    try:
        import torch
    except ImportError:
        torch = None
    rows = []
    for threads in args.threads:
        set_threads(threads)
        ours = models(ggrad)
        theirs = models(torch) if torch is not None else {}
        for name, model in ours.items():
            g_ms = median_ms(step_fn(ggrad, model, x), repeats=args.steps)
            t_ms = median_ms(step_fn(torch, theirs[name], x), repeats=args.steps) if torch else float("nan")
            rows.append({"model": name, "threads": threads, "ggrad ms/step": f"{g_ms:.1f}",
                         "torch ms/step": f"{t_ms:.1f}", "ratio (torch/ggrad, >1 = ggrad faster)": f"{t_ms / g_ms:.2f}"})
    print_table(f"batch {BATCH}, sequence {args.seq}, Adam (median of {args.steps} steps)", rows, list(rows[0]))


if __name__ == "__main__":
    main()
