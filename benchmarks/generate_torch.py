"""bench_generate's PyTorch side: the char-GPT architecture and greedy loop in eager PyTorch.

Importable (CPU runs), and a script for GPU runs, where it is the child process that holds PyTorch's CUDA
(it never imports ggrad): `python generate_torch.py CONFIG USE_CACHE REPEATS BATCH` prints {"tok_s": ...}.
"""

import json
import statistics
import sys
import time

CONFIGS = {   # small: the char-GPT example's defaults
    "small": dict(vocab=96, d_model=128, layers=4, heads=4, context=64, prompt=4),
    "large": dict(vocab=96, d_model=256, layers=6, heads=8, context=256, prompt=16),
}


def median_s(run, repeats):
    run()   # warm-up (and the first run's allocations)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def torch_run(cfg, use_cache, device="cpu", batch=1):
    """The same model and greedy loop in PyTorch (eager, no_grad) on `device` ("cpu" or "cuda"), `batch`
    copies of the prompt."""
    import torch
    from torch import nn
    d, h, ctx = cfg["d_model"], cfg["heads"], cfg["context"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

        def forward(self, x, cache):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
            if cache is not None:
                if cache:
                    k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
                cache[:] = [k, v]
            a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
            x = x + self.out(a.transpose(1, 2).reshape(b, t, d))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(cfg["vocab"], d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList([Block() for _ in range(cfg["layers"])])
            self.ln_f = nn.LayerNorm(d)

        def forward(self, ids, start, caches):
            x = self.tok(ids) + self.pos(torch.arange(start, start + ids.shape[1], device=ids.device))
            for block, cache in zip(self.blocks, caches):
                x = block(x, cache)
            return self.ln_f(x) @ self.tok.weight.T

    torch.manual_seed(0)
    model = GPT().eval().to(device)
    prompt = (torch.arange(cfg["prompt"])[None] % cfg["vocab"]).repeat(batch, 1).to(device)

    def run():
        ids = prompt
        caches = [[] for _ in model.blocks] if use_cache else [None] * len(model.blocks)
        with torch.no_grad():
            while ids.shape[1] < ctx:
                start = ids.shape[1] - 1 if use_cache and caches[0] else 0
                logits = model(ids[:, start:], start, caches)
                ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], 1)
        return ids.cpu()
    return run


if __name__ == "__main__":
    name, cache, repeats, batch = sys.argv[1], bool(int(sys.argv[2])), int(sys.argv[3]), int(sys.argv[4])
    cfg = CONFIGS[name]
    seconds = median_s(torch_run(cfg, cache, "cuda", batch), repeats)
    print(json.dumps({"tok_s": (cfg["context"] - cfg["prompt"]) * batch / seconds}))
