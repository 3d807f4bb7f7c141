"""Check that the installed GGML works in this environment: one training step on the CPU with 2 threads.

Run by scripts/install.sh after building GGML, in a fresh interpreter per import order. With `--torch-first`
PyTorch is imported before ggrad (where it is installed), since one GGML build can work alone and abort beside
PyTorch (`free(): invalid pointer`, seen with a GGML whose compiler linked libstdc++ statically). Prints the
build (`ggrad.ggml.build_info()`) and exits 0 when the step gave a finite loss; a crash is a non-zero exit.

    python scripts/check_ggml.py [--torch-first]
"""

import argparse
import importlib.util
import math
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-first", action="store_true", help="import PyTorch (if installed) before ggrad")
    args = parser.parse_args()
    has_torch = importlib.util.find_spec("torch") is not None
    if args.torch_first and has_torch:
        import torch
        torch.ones(64, 64) @ torch.ones(64, 64)

    import numpy as np
    import ggrad
    from ggrad import nn, optim

    if has_torch and not args.torch_first:
        import torch
        torch.ones(64, 64) @ torch.ones(64, 64)
    ggrad.set_num_threads(2)   # threads and barriers (OpenMP where built with it) even on one core
    rng = np.random.default_rng(0)
    x = ggrad.tensor(rng.standard_normal((64, 32)).astype(np.float32))
    y = ggrad.tensor(rng.integers(0, 4, 64).astype(np.int32))
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 4))
    opt = optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(3):
        loss = ggrad.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    value = loss.item()
    info = ggrad.ggml.build_info()
    print(f"{info['summary']} | loss {value:.4f} | torch {'imported' if has_torch else 'not installed'}")
    return 0 if math.isfinite(value) else 1


if __name__ == "__main__":
    sys.exit(main())
