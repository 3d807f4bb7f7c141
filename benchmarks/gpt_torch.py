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


VARIANTS = ("eager", "sdpa", "compile")


def torch_step_fn(cfg=W2, device="cpu", autocast=None, variant="eager", wrap=None):
    """The same step in PyTorch; `autocast` "f16"/"bf16": the forward under torch.autocast (f16 with
    torch.amp.GradScaler). `variant`: "eager" (nn.MultiheadAttention with the causal mask, as ggrad's model),
    "sdpa" (the same parameters, attention by F.scaled_dot_product_attention with is_causal: flash attention
    on CUDA), "compile" (sdpa's model under torch.compile). `wrap(model)`, when given, is what the step
    calls (DistributedDataParallel)."""
    import torch
    from torch import nn

    class CausalSelfAttention(nn.Module):
        """MultiheadAttention's parameters (one input projection of q, k, v, one output projection)."""
        def __init__(self, d, h):
            super().__init__()
            self.heads = h
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (part.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                       for part in self.qkv(x).split(c, dim=2))
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).reshape(b, t, c))

    class Block(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = (nn.MultiheadAttention(d, h, batch_first=True) if variant == "eager"
                         else CausalSelfAttention(d, h))
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

        def forward(self, x, mask):
            a = self.ln1(x)
            if variant == "eager":
                x = x + self.attn(a, a, a, attn_mask=mask, need_weights=False)[0]
            else:
                x = x + self.attn(a)
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
    forward = torch.compile(model) if variant == "compile" else model
    forward = wrap(forward) if wrap is not None else forward
    x_np, y_np = batch_data(cfg)
    x = torch.from_numpy(x_np).long().to(device)
    y = torch.from_numpy(y_np.reshape(-1)).long().to(device)

    dtype = getattr(torch, AUTOCAST[autocast]) if autocast else torch.float16
    scaler = torch.amp.GradScaler(device, enabled=autocast == "f16")

    def step():
        with torch.autocast(device, dtype=dtype, enabled=autocast is not None):
            loss = torch.nn.functional.cross_entropy(forward(x).reshape(-1, cfg["vocab"]), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.item()
    return step
