"""Bar chart of W2 training tokens/s per build and thread count, from bench_gpt.py --json rows.

    python benchmarks/plot.py results.json benchmarks/tokens_per_s.png
"""

import json
import sys


def main(src, dst):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = json.load(open(src))
    labels, ggrad_tps, torch_tps = [], [], []
    for r in rows:
        labels.append(f"{r['build']}\n{r['threads']} thread(s)")
        ggrad_tps.append(float(r["ggrad tok/s"].replace(",", "")))
        torch_tps.append(float(r["torch tok/s"].replace(",", "")))
    xs = range(len(rows))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar([x - 0.2 for x in xs], ggrad_tps, 0.4, label="ggrad")
    ax.bar([x + 0.2 for x in xs], torch_tps, 0.4, label="PyTorch 2.13 CPU")
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("training tokens/s (W2)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(dst)


if __name__ == "__main__":
    main(*sys.argv[1:3])
