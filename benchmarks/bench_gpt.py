"""Workload W2: char GPT training throughput, ggrad vs PyTorch CPU in the same run and thread count.

vocab 96, d_model 128, 4 layers, 4 heads, context 64, batch 16, pre-LN GELU (tanh) MLP x4, tied embeddings,
AdamW lr 3e-4. Prints tokens/s (median of --steps steps after warm-up) and the ratio ggrad / PyTorch.

    python benchmarks/bench_gpt.py [--threads 1 2] [--steps 20] [--device cpu] [--replay]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median_ms, print_table, set_threads  # noqa: E402

import ggrad  # noqa: E402
from ggrad import optim  # noqa: E402
from ggrad.examples.char_gpt import CharGPT  # noqa: E402
from gpt_torch import W2, batch_data, torch_step_fn  # noqa: E402,F401  (the PyTorch side)


AUTOCAST = {"f16": ggrad.float16, "bf16": ggrad.bfloat16}


def ggrad_step_fn(device="cpu", cfg=W2, autocast=None, replay=False):
    """One training step of the `cfg` GPT in ggrad (forward, backward, AdamW: one graph).

    `autocast` "f16" or "bf16" runs the forward under ggrad.autocast (f16 with a GradScaler, whose
    inf check is read once a step, as PyTorch's scaler syncs once a step). `replay`: the step goes
    through ggrad.compile_step (recorded, then replayed with each batch: no op recorded in Python)."""
    dev = ggrad.device(device)
    x_np, y_np = batch_data(cfg)
    train = train_step(dev, cfg, AUTOCAST.get(autocast))
    run = ggrad.compile_step(train) if replay else train

    def step():
        x, y = ggrad.tensor(x_np, device=dev), ggrad.tensor(y_np.reshape(-1), device=dev)
        return run(x, y).item()
    return step


def train_step(dev, cfg, dtype=None):
    """train(x, y) -> loss: one AdamW step of a new `cfg` GPT on `dev` (seeded) under autocast `dtype` (None:
    float32; float16 with a GradScaler)."""
    ggrad.manual_seed(0)
    model = CharGPT(cfg["vocab"], cfg["d_model"], cfg["layers"], cfg["heads"], cfg["context"]).to(dev)
    opt = optim.AdamW(model.parameters(), lr=cfg["lr"])
    scaler = ggrad.amp.GradScaler(enabled=dtype is ggrad.float16)
    kind = dev.torch_name.split(":")[0]

    def train(x, y):
        with ggrad.autocast(kind, dtype=dtype or ggrad.float16, enabled=dtype is not None):
            loss = ggrad.cross_entropy(model(x).reshape(-1, cfg["vocab"]), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    return train


def save_rows(path, label, rows):
    import json
    existing = json.load(open(path)) if os.path.exists(path) else []
    existing += [dict(row, build=label) for row in rows]
    with open(path, "w") as f:
        json.dump(existing, f, indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", help="also append the rows to this JSON file (for plot.py)")
    parser.add_argument("--label", default="", help="name of this GGML build in the JSON rows")
    parser.add_argument("--replay", action="store_true",
                        help="also time the step through ggrad.compile_step (recorded once, replayed)")
    args = parser.parse_args()
    tokens = W2["batch"] * W2["context"]
    rows = []
    for threads in args.threads:
        set_threads(threads)
        g_ms = median_ms(ggrad_step_fn(args.device), warmup=5, repeats=args.steps)
        r_ms = median_ms(ggrad_step_fn(args.device, replay=True), warmup=5, repeats=args.steps) \
            if args.replay else None
        try:
            t_ms = median_ms(torch_step_fn(), warmup=5, repeats=args.steps)
        except ImportError:
            t_ms = float("nan")
        row = {"threads": threads, "ggrad tok/s": f"{tokens / g_ms * 1e3:,.0f}",
               "torch tok/s": f"{tokens / t_ms * 1e3:,.0f}", "ggrad ms": f"{g_ms:.1f}",
               "torch ms": f"{t_ms:.1f}", "ratio ggrad/torch": f"{t_ms / g_ms:.2f}"}
        if r_ms is not None:
            row.update({"replayed ms": f"{r_ms:.1f}", "ratio replayed/torch": f"{t_ms / r_ms:.2f}"})
        rows.append(row)
    if args.json:
        save_rows(args.json, args.label, rows)
    print_table(f"W2 char-GPT training step ({args.device}; median of {args.steps} after warm-up)", rows,
                list(rows[0]))


if __name__ == "__main__":
    main()
