"""Quantization: per GGML type, bits per weight, round-trip RMS error, and mul_mat speed against f32.

    python benchmarks/bench_quant.py [--rows 1024 --cols 4096 --batch 1 16 --threads 1 --types q8_0 q4_0 ...]

A weight W (rows x cols, standard normal, so the RMS error is also the error relative to the std) is
quantized with `ggrad.quantize` (GGML's ggml_quantize_chunk; types that need an importance matrix get a
uniform one) and dequantized; then `x @ W.T` for x of each batch size runs through GGML's mul_mat on the
quantized blocks and on the f32 W. ggrad only: PyTorch has no GGML quantized types to compare with.
Each time is a median over 7 graphs of 16 independent products each, divided by 16 (after warm-ups
that also build the codebook types' grids); "quantize s" is one quantization of W on the host.
"""

import argparse
import time

import numpy as np

import ggrad
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--types", nargs="+", default=None)
    args = parser.parse_args()
    set_threads(args.threads)
    rng = np.random.default_rng(0)
    w_np = rng.standard_normal((args.rows, args.cols)).astype(np.float32)
    w = ggrad.tensor(w_np)
    xs = {b: ggrad.tensor(rng.standard_normal((b, args.cols)).astype(np.float32)) for b in args.batch}
    f32_ms = {b: matmul_ms(xs[b], w) for b in args.batch}
    rows = [{"type": "f32", "bits/weight": "32", "RMS error": "0", "quantize s": "-",
             **{f"B={b} ms": f"{f32_ms[b]:.2f}" for b in args.batch},
             **{f"B={b} f32/q": "1.00" for b in args.batch}}]
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
        for b in args.batch:
            ms = matmul_ms(xs[b], q)
            row[f"B={b} ms"] = f"{ms:.2f}"
            row[f"B={b} f32/q"] = f"{f32_ms[b] / ms:.2f}"
        rows.append(row)
        print(f"{name}: done", flush=True)
    columns = ["type", "bits/weight", "RMS error", "quantize s"]
    for b in args.batch:
        columns += [f"B={b} ms", f"B={b} f32/q"]
    print_table(f"x (B x {args.cols}) @ W.T, W {args.rows} x {args.cols} standard normal, {args.threads} threads, "
                f"GGML {ggrad.ggml.VERSION}", rows, columns)


if __name__ == "__main__":
    main()
