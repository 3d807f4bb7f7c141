"""torch.linalg on the host: a Glow-style invertible 1x1 convolution step (z = W x per pixel, loss with
log|det W|, backward, Adam) in ggrad against PyTorch, with the same shapes, one thread each. ggrad's
slogdet reads W to the host (one synchronisation) and its gradient W^-T is a second host call in the
backward; PyTorch's runs in place. Figures: median milliseconds a step, and ggrad / PyTorch.

    PYTHONPATH=. python benchmarks/bench_linalg.py [--channels 16 64] [--repeats 20]
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median_ms, print_table, set_threads  # noqa: E402

import ggrad  # noqa: E402
import torch  # noqa: E402


def _step_fn(lib, channels, batch=16, side=16):
    rng = np.random.default_rng(0)
    weight = lib.tensor(np.linalg.qr(rng.standard_normal((channels, channels)))[0].astype(np.float32),
                        requires_grad=True)
    x = lib.tensor(rng.standard_normal((batch, channels, side, side)).astype(np.float32))
    opt = lib.optim.Adam([weight], lr=1e-3)

    def step():
        opt.zero_grad()
        z = lib.einsum("oc,bchw->bohw", weight, x)
        loss = (0.5 * (z * z).sum((1, 2, 3)) - side * side * lib.linalg.slogdet(weight).logabsdet).mean()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--channels", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    set_threads(1)
    rows = []
    for channels in args.channels:
        ours = median_ms(_step_fn(ggrad, channels), repeats=args.repeats)
        theirs = median_ms(_step_fn(torch, channels), repeats=args.repeats)
        rows.append({"channels": channels, "ggrad ms": f"{ours:.2f}", "torch ms": f"{theirs:.2f}",
                     "ratio": f"{ours / theirs:.2f}"})
    print_table("Glow 1x1 convolution step (16 x C x 16 x 16, slogdet of C x C), 1 thread", rows,
                ["channels", "ggrad ms", "torch ms", "ratio"])


if __name__ == "__main__":
    main()
