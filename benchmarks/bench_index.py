"""Batching by `x[idx]`: ggrad against numpy's fancy indexing and PyTorch's, on host data, one thread.

Each iteration gathers one batch and then lets the pending graph be computed (`ggrad.realize()`: here a
graph of uploads only), as a training loop does when a step consumes the batch; numpy and PyTorch gather
the same rows from their own arrays. Figures are the best of `--repeats` timeit repeats, in microseconds.

- tokens B x T: B windows of T consecutive tokens from 1M int64 tokens (a language model's batch);
- rows N: N random rows of a 60000 x 784 float32 matrix (an MNIST-sized dataset).

    python benchmarks/bench_index.py [--repeats 7] [--number 50]
"""

import argparse
import os
import sys
import timeit

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import print_table  # noqa: E402

import ggrad  # noqa: E402


def _cases():
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 96, 1_000_000).astype(np.int64)
    rows = rng.standard_normal((60000, 784)).astype(np.float32)
    for b, t in ((16, 64), (64, 256), (512, 256)):
        yield f"tokens {b}x{t}", tokens, rng.integers(0, len(tokens) - t, (b,))[:, None] + np.arange(t)
    for n in (128, 1024):
        yield f"rows {n}", rows, rng.permutation(len(rows))[:n]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--number", type=int, default=50)
    args = parser.parse_args(argv)
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        torch = None
    ggrad.set_num_threads(1)

    def best_us(fn):
        return min(timeit.repeat(fn, number=args.number, repeat=args.repeats)) / args.number * 1e6

    table = []
    for name, data, index in _cases():
        x, i = ggrad.tensor(data), ggrad.tensor(index)
        x.numpy(), i.numpy()   # both held as computed host data, as a dataset is

        def ggrad_batch():
            batch = x[i]
            del batch
            ggrad.realize()

        row = dict(case=name, ggrad_us=best_us(ggrad_batch), numpy_us=best_us(lambda: data[index]))
        if torch is not None:
            td, ti = torch.from_numpy(data), torch.from_numpy(index)
            row["torch_us"] = best_us(lambda: td[ti])
        row["ggrad_over_numpy"] = row["ggrad_us"] / row["numpy_us"]
        table.append({k: f"{v:.2f}" if k == "ggrad_over_numpy" else (f"{v:.1f}" if isinstance(v, float) else v)
                      for k, v in row.items()})
    print_table("x[idx], one thread, best of repeats (us)", table, list(table[0]))


if __name__ == "__main__":
    main()
