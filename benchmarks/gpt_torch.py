"""The PyTorch side of the char-GPT benchmarks, importing no ggrad: GPU runs measure PyTorch in a process
that loads no GGML (PyTorch's CUDA libraries and a CUDA build of GGML in one process abort it)."""

import math

import numpy as np

W2 = dict(vocab=96, d_model=128, layers=4, heads=4, context=64, batch=16, lr=3e-4)
BIG = dict(vocab=96, d_model=512, layers=8, heads=8, context=256, batch=32, lr=3e-4)   # GPU_BUILD.md's anchor
TINY = dict(vocab=96, d_model=64, layers=2, heads=2, context=32, batch=8, lr=3e-4)   # a quick check of the scripts
CONFIGS = {"w2": W2, "big": BIG, "tiny": TINY}
AUTOCAST = {"f16": "float16", "bf16": "bfloat16"}


def batch_data(cfg=W2, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["context"])).astype(np.int32)
    y = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["context"])).astype(np.int32)
    return x, y


def torch_step_fn(cfg=W2, device="cpu", autocast=None):
    """The same step in PyTorch (eager); `autocast` "f16"/"bf16": the forward under torch.autocast (f16
    with torch.amp.GradScaler)."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, h, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

        def forward(self, x, mask):
            a = self.ln1(x)
            x = x + self.attn(a, a, a, attn_mask=mask, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg["d_model"]
            self.tok, self.pos = nn.Embedding(cfg["vocab"], d), nn.Embedding(cfg["context"], d)
            self.blocks = nn.ModuleList([Block(d, cfg["heads"]) for _ in range(cfg["layers"])])
            self.ln_f = nn.LayerNorm(d)
            t = cfg["context"]
            self.register_buffer("mask", torch.triu(torch.full((t, t), -math.inf), 1))

        def forward(self, ids):
            h = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
            for b in self.blocks:
                h = b(h, self.mask)
            return self.ln_f(h) @ self.tok.weight.T

    torch.manual_seed(0)
    model = GPT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"])
    x_np, y_np = batch_data(cfg)
    x = torch.from_numpy(x_np).long().to(device)
    y = torch.from_numpy(y_np.reshape(-1)).long().to(device)

    dtype = getattr(torch, AUTOCAST[autocast]) if autocast else torch.float16
    scaler = torch.amp.GradScaler(device, enabled=autocast == "f16")

    def step():
        with torch.autocast(device, dtype=dtype, enabled=autocast is not None):
            loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, cfg["vocab"]), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.item()
    return step
