"""Quantization: per GGML type, bits per weight, round-trip RMS error, mul_mat speed against f32, and a
trained char-GPT's validation loss after quantizing it.

    python benchmarks/bench_quant.py [--rows 1024 --cols 4096 --batch 1 16 --threads 1 --types q8_0 q4_0 ...]
                                     [--gpt-checkpoint runs/char_gpt/checkpoint.gguf | --gpt-steps 500]

A weight W (rows x cols, standard normal, so the RMS error is also the error relative to the std) is
quantized with `ggrad.quantize` (GGML's ggml_quantize_chunk; types that need an importance matrix get a
uniform one) and dequantized; then `x @ W.T` for x of each batch size runs through GGML's mul_mat on the
quantized blocks and on the f32 W. ggrad only: PyTorch has no GGML quantized types to compare with.
Each time is a median over 7 graphs of 16 independent products each, divided by 16 (after warm-ups
that also build the codebook types' grids); "quantize s" is one quantization of W on the host.

"GPT val loss": the char-GPT example's model (from --gpt-checkpoint, or trained here for --gpt-steps
steps with the example's defaults) quantized by `nn.quantize_` and evaluated on the example's fixed
validation batches; "GPT q%" is the share of its Linear/Embedding/attention weights the type could
quantize (K-quants need rows of 256: only the MLP's second layer has them at d_model 128). The f16 row
rounds those weights to f16 and evaluates in f32.
"""

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

import ggrad
from ggrad import nn
from ggrad.examples import char_gpt
from ggrad.ggml import lib

from common import median_ms, print_table, set_threads


def quantizable():
    """Every type ggrad.quantize accepts (all quantized types but the dot-product-only q8_1 and q8_K)."""
    return [d.name for d in ggrad.ggml.all_dtypes()
            if d.is_quantized and lib.ggml_get_type_traits(d.value).to_float != ggrad.ggml.ffi.NULL]


PRODUCTS = 16  # products per graph, so that ggrad's per-step cost (tracing, planning) is spread out


def matmul_ms(x, w):
    """Median ms of one x @ w.T, timed as PRODUCTS independent products computed in one graph."""
    def step():
        outs = [x @ w.T for _ in range(PRODUCTS)]
        ggrad.realize()
        return outs
    return median_ms(step, warmup=2, repeats=7) / PRODUCTS


class CharGPTEval:
    """A trained char-GPT's state and validation data: `loss(type)` quantizes a copy and evaluates it."""

    def __init__(self, checkpoint, steps):
        self.args = char_gpt.parse_args([])
        _, self.val = char_gpt.load_corpus()
        if checkpoint is None:
            out = Path(tempfile.mkdtemp(prefix="bench_quant_gpt_"))
            char_gpt.main(["--steps", str(steps), "--eval-every", str(steps), "--sample", "0", "--out", str(out)])
            checkpoint = out / "checkpoint.gguf"
        self.state = ggrad.load(checkpoint)["model"]
        a = self.args
        self.new = lambda: char_gpt.CharGPT(len(char_gpt.VOCAB), a.d_model, a.layers, a.heads, a.context)

    def loss(self, name):
        """(validation loss, % of the quantizable weights quantized, None for f32/f16) with the weights in type
        `name`."""
        model = self.new()
        model.load_state_dict(self.state)
        share, weights = None, sum(p.numel() for p in model.parameters() if p.ndim == 2)   # all its matrices
        if name == "f16":
            state = {k: v.half().float() if v.ndim == 2 else v for k, v in self.state.items()}
            model.load_state_dict(state)
        if name not in ("f32", "f16"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")          # rows K-quants cannot pack stay float: see "GPT q%"
                nn.quantize_(model, name)
            done = sum(p.numel() for p in model.parameters() if p.dtype.is_quantized)
            share = 100.0 * done / weights
        return char_gpt.evaluate(model, self.val, self.args, "cpu"), share


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--types", nargs="+", default=None)
    parser.add_argument("--gpt-checkpoint", default=None, help="a char_gpt checkpoint.gguf")
    parser.add_argument("--gpt-steps", type=int, default=500, help="training steps when no checkpoint is given")
    args = parser.parse_args()
    set_threads(args.threads)
    gpt = CharGPTEval(args.gpt_checkpoint, args.gpt_steps)
    rng = np.random.default_rng(0)
    w_np = rng.standard_normal((args.rows, args.cols)).astype(np.float32)
    w = ggrad.tensor(w_np)
    xs = {b: ggrad.tensor(rng.standard_normal((b, args.cols)).astype(np.float32)) for b in args.batch}
    f32_ms = {b: matmul_ms(xs[b], w) for b in args.batch}
    rows = []
    for name, weight in (("f32", w), ("f16", w.half())):
        ms = f32_ms if name == "f32" else {b: matmul_ms(xs[b], weight) for b in args.batch}
        rms = float(np.sqrt(np.mean((weight.float().numpy() - w_np) ** 2)))
        loss, _ = gpt.loss(name)
        rows.append({"type": name, "bits/weight": name[1:], "RMS error": f"{rms:.4f}", "quantize s": "-",
                     "GPT val loss": f"{loss:.4f}", "GPT q%": "-",
                     **{f"B={b} ms": f"{ms[b]:.2f}" for b in args.batch},
                     **{f"B={b} f32/q": f"{f32_ms[b] / ms[b]:.2f}" for b in args.batch}})
    for name in args.types or quantizable():
        dtype = ggrad.ggml.as_dtype(name)
        imatrix = np.ones(args.cols, np.float32) if lib.ggml_quantize_requires_imatrix(dtype.value) else None
        ggrad.quantize(ggrad.tensor(w_np[:1]), name, imatrix=imatrix).realize()   # grids built here
        t0 = time.perf_counter()
        q = ggrad.quantize(w, name, imatrix=imatrix).realize()
        quantize_s = time.perf_counter() - t0
        rms = float(np.sqrt(np.mean((q.dequantize().numpy() - w_np) ** 2)))
        row = {"type": name, "bits/weight": f"{8 * dtype.type_size / dtype.block_size:.4g}",
               "RMS error": f"{rms:.4f}", "quantize s": f"{quantize_s:.2f}"}
        if lib.ggml_quantize_requires_imatrix(dtype.value):
            row["GPT val loss"], row["GPT q%"] = "-", "-"          # needs an importance matrix per weight
        else:
            loss, share = gpt.loss(name)
            row["GPT val loss"], row["GPT q%"] = f"{loss:.4f}", f"{share:.0f}"
        for b in args.batch:
            ms = matmul_ms(xs[b], q)
            row[f"B={b} ms"] = f"{ms:.2f}"
            row[f"B={b} f32/q"] = f"{f32_ms[b] / ms:.2f}"
        rows.append(row)
        print(f"{name}: done", flush=True)
    columns = ["type", "bits/weight", "RMS error", "quantize s"]
    for b in args.batch:
        columns += [f"B={b} ms", f"B={b} f32/q"]
    columns += ["GPT val loss", "GPT q%"]
    print_table(f"x (B x {args.cols}) @ W.T, W {args.rows} x {args.cols} standard normal, {args.threads} threads, "
                f"GGML {ggrad.ggml.VERSION}", rows, columns)


if __name__ == "__main__":
    main()
