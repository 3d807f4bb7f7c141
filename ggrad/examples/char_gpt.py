"""Train a character-level GPT on the Python standard library's own source code.

The corpus is the text of the `.py` files of the running interpreter's standard library (real text,
nothing to download), split into train and validation by file. The model: token and position
embeddings, pre-LN TransformerBlocks (nn.MultiHeadAttention, GELU MLP), a final LayerNorm, and an
output layer tied to the token embedding. The MLP's GELU is GPT-2's tanh form. The sample at the end
comes from `CharGPT.generate`, which decodes one position per step through a KV cache.

    python -m ggrad.examples.char_gpt                  # defaults: about 5 minutes on 2 CPU cores
    python -m ggrad.examples.char_gpt --steps 200 --device cuda:0
"""

import argparse
import math
import sys
import sysconfig
import time
import zlib
from pathlib import Path

import numpy as np
from tqdm import tqdm

import ggrad
from ggrad import nn, optim

# 95 printable ASCII characters and newline: the W2 benchmark's vocabulary of 96.
VOCAB = "\n" + "".join(chr(c) for c in range(32, 127))
_ENCODE = np.full(256, VOCAB.index("?"), dtype=np.uint8)
for _i, _ch in enumerate(VOCAB):
    _ENCODE[ord(_ch)] = _i
_ENCODE[ord("\t")] = VOCAB.index(" ")


def encode(text):
    """Characters -> token ids (tabs become spaces, anything outside ASCII becomes '?')."""
    raw = np.frombuffer(text.encode("ascii", errors="replace"), dtype=np.uint8)
    return _ENCODE[raw]


def decode(ids):
    return "".join(VOCAB[int(i)] for i in ids)


def load_corpus(path=None, max_bytes=24 << 20, val_fraction=0.1):
    """(train_ids, val_ids): `path` (a file or a folder of .py files) or the standard library, split by file."""
    root = Path(path) if path else Path(sysconfig.get_paths()["stdlib"])
    if not root.exists():
        raise FileNotFoundError(f"corpus path {root} does not exist")
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)
    if not files:
        raise ValueError(f"no .py files under {root}")
    train, val, total = [], [], 0
    for f in files:
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        ids = encode(text)
        # hash of the path, not Python's salted hash(): the split is the same on every run
        if len(files) > 1 and zlib.crc32(str(f.relative_to(root)).encode()) % 1000 < val_fraction * 1000:
            val.append(ids)
        else:
            train.append(ids)
        total += len(ids)
        if total >= max_bytes:
            break
    if root.is_file():
        ids = train[0]
        cut = int(len(ids) * (1 - val_fraction))
        return ids[:cut], ids[cut:]
    return np.concatenate(train), np.concatenate(val)


def unigram_loss(train, val):
    """Cross-entropy (nats) of predicting validation characters by their training frequencies."""
    counts = np.bincount(train, minlength=len(VOCAB)).astype(np.float64) + 1.0
    logp = np.log(counts / counts.sum())
    return float(-logp[val].mean())


class CharGPT(nn.Module, nn.GenerationMixin):
    """Token + position embeddings, pre-LN transformer blocks, final LayerNorm, tied output layer; `generate`
    from nn.GenerationMixin."""

    def __init__(self, vocab, d_model, layers, heads, context, dropout=0.0):
        super().__init__()
        self.context = context
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList([nn.TransformerBlock(d_model, heads, 4 * d_model, dropout=dropout,
                                                         activation="gelu_tanh")   # GPT-2's GELU
                                     for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self._positions = {}
        # GPT-2's scale: N(0, 1) embeddings (PyTorch's default) would make the tied logits huge
        nn.init.normal_(self.tok.weight, std=0.02)
        nn.init.normal_(self.pos.weight, std=0.02)

    def forward(self, ids, kv_cache=None):
        """Logits (B, T, vocab) for token ids (B, T); with `kv_cache` (see `new_kv_cache`) the ids are the T
        positions after those already cached."""
        t = ids.shape[1]
        if kv_cache is not None:
            pos = kv_cache.position_ids(t, ids.device)
        else:
            if t not in self._positions:
                self._positions[t] = np.arange(t, dtype=np.int32)
            pos = ggrad.tensor(self._positions[t], device=ids.device)
        start = 0 if kv_cache is None or kv_cache.inputs is not None else kv_cache.length
        if start + t > self.context:
            raise ValueError(f"sequence of {start + t} tokens ({start} cached) is longer than the context "
                             f"{self.context}")
        h = self.tok(ids) + self.pos(pos)
        for i, block in enumerate(self.blocks):
            h = block(h, kv_cache=None if kv_cache is None else kv_cache[i])
        h = self.ln_f(h)
        return ggrad.linear(h, self.tok.weight)   # tied output: h @ tok.weight.T without a transpose copy

    def new_kv_cache(self, batch, static=False):
        """An empty KVCache for `batch` sequences of up to `context` positions, where the model lives
        (`static`: see nn.KVCache)."""
        attn = self.blocks[0].attn
        return nn.KVCache(len(self.blocks), batch, attn.num_heads, self.context, attn.head_dim,
                          device=self.tok.weight.device, static=static)


def batches(data, batch, context, rng):
    """Random windows of `context + 1` tokens: inputs and next-token targets."""
    starts = rng.integers(0, len(data) - context - 1, batch)
    window = np.stack([data[s:s + context + 1] for s in starts]).astype(np.int32)
    return window[:, :-1], window[:, 1:]


def step_seed(seed, step):
    """The seed of training step `step`: its batch and its dropout masks come from it alone, so a run resumed
    at any step draws exactly what the uninterrupted run drew there."""
    return int(np.random.SeedSequence([seed, step]).generate_state(1)[0])


def evaluate(model, data, args, device, n_batches=8):
    rng = np.random.default_rng(1)
    model.eval()
    total = []
    with ggrad.no_grad():
        for _ in range(n_batches):
            x, y = batches(data, args.batch, args.context, rng)
            logits = model(ggrad.tensor(x, device=device))
            total.append(ggrad.cross_entropy(logits.reshape(-1, len(VOCAB)), ggrad.tensor(y.reshape(-1),
                                                                                        device=device)))
    model.train()
    return float(np.mean([t.item() for t in total]))


def sample(model, prompt, n, device, temperature=0.8, seed=0, echo=None):
    """`prompt` and `n` characters sampled after it (model.generate with a KV cache, seeded); `echo`
    (e.g. `print`) gets each character as it is made (generate's stream)."""
    ggrad.manual_seed(seed)
    ids = ggrad.tensor(encode(prompt).astype(np.int32)[None], device=device)
    text = decode(ids.numpy()[0])
    for token in model.generate(ids, n, temperature=temperature, stream=True):
        char = decode(token)
        text += char
        if echo is not None:
            echo(char)
    return text


def plot_losses(history, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[examples]'): no loss-curve PNG written")
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    if history["train"]:
        steps, train = zip(*history["train"])
        ax.plot(steps, train, label="train (batch)", alpha=0.5)
    if history["val"]:
        vs, vl = zip(*history["val"])
        ax.plot(vs, vl, "o-", label="validation")
    ax.axhline(history["unigram"], color="gray", ls="--", label="unigram baseline")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Train a character-level GPT on Python's standard library.")
    p.add_argument("--device", default="cpu")
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--dropout", type=float, default=0.0, help="dropout in the transformer blocks")
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--corpus", default=None, help="a text file or a folder of .py files (default: the stdlib)")
    p.add_argument("--out", default="runs/char_gpt", help="folder for the checkpoint and the loss curve")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    p.add_argument("--stop-after", type=int, default=None,
                   help="stop after this step and write the checkpoint, as an interruption would (the schedule "
                        "still spans --steps); --resume continues bitwise as the uninterrupted run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eager", action="store_true",
                   help="record every training step (default: ggrad.compile_step replays the recorded step)")
    p.add_argument("--sample", type=int, default=300, help="characters to generate at the end")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    ggrad.manual_seed(args.seed)
    device = ggrad.device(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    train, val = load_corpus(args.corpus)
    baseline = unigram_loss(train, val)
    print(f"corpus: {len(train):,} train / {len(val):,} validation characters; "
          f"unigram baseline {baseline:.3f} nats; device {device.torch_name} ({device.description})")

    model = CharGPT(len(VOCAB), args.d_model, args.layers, args.heads, args.context, args.dropout).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                      lr=args.lr, betas=(0.9, 0.99))
    schedule = optim.lr_scheduler.WarmupCosineLR(opt, warmup_steps=min(args.warmup, args.steps // 10),
                                                 total_steps=args.steps,
                                                 min_lr=args.lr * 0.1)
    history = {"train": [], "val": [], "unigram": baseline}
    start = 0
    checkpoint = out / "checkpoint.gguf"  # GGUF: readable by GGML tools (gguf-dump, llama.cpp's gguf reader)
    if args.resume:
        if not checkpoint.exists():
            raise FileNotFoundError(f"--resume: no checkpoint at {checkpoint}")
        state = ggrad.load(checkpoint)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        start = int(state["step"])
        saved = state.get("history", {})   # checkpoints of earlier versions have none
        history["train"] = [tuple(p) for p in saved.get("train", [])]
        history["val"] = [tuple(p) for p in saved.get("val", [])]
        print(f"resumed from {checkpoint} at step {start}")
    print(f"model: {n_params:,} parameters, d_model {args.d_model}, {args.layers} layers, {args.heads} heads, "
          f"context {args.context}, batch {args.batch}")

    stop = args.steps if args.stop_after is None else min(args.stop_after, args.steps)
    tokens_per_step = args.batch * args.context
    bar = tqdm(range(start, stop), initial=start, total=args.steps, dynamic_ncols=True, file=sys.stdout)
    t0, pending = time.perf_counter(), []

    def save_checkpoint(step):
        ggrad.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "schedule": schedule.state_dict(),
                    "step": step, "history": {"train": history["train"], "val": history["val"]}}, checkpoint)

    def train_step(x, y):
        logits = model(x)
        loss = ggrad.cross_entropy(logits.reshape(-1, len(VOCAB)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    # the step's shapes never change: recorded once, then replayed with each batch (and the schedule's lr)
    run_step = train_step if args.eager else ggrad.compile_step(train_step)

    for step in bar:
        seed = step_seed(args.seed, step)
        ggrad.manual_seed(seed)   # dropout draws from ggrad's generator
        x, y = batches(train, args.batch, args.context, np.random.default_rng(seed))
        loss = run_step(ggrad.tensor(x, device=device), ggrad.tensor(y.reshape(-1), device=device))
        schedule.step()
        pending.append((step + 1, loss))
        if (step + 1) % 10 == 0 or step + 1 in (args.steps, stop):
            elapsed = time.perf_counter() - t0
            history["train"].extend((s, l.item()) for s, l in pending)
            bar.set_postfix(loss=f"{history['train'][-1][1]:.3f}",
                            tok_s=f"{len(pending) * tokens_per_step / elapsed:,.0f}")
            t0, pending = time.perf_counter(), []
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            v = evaluate(model, val, args, device)
            history["val"].append((step + 1, v))
            bar.write(f"step {step + 1}: validation loss {v:.3f} nats (unigram {baseline:.3f})")
            save_checkpoint(step + 1)
            t0 = time.perf_counter()
        elif step + 1 == stop:
            save_checkpoint(step + 1)
    bar.close()
    if stop < args.steps:
        print(f"stopped after step {stop} of {args.steps}; checkpoint {checkpoint} (continue with --resume)")
        return {"history": history, "unigram": baseline}
    final = history["val"][-1][1] if history["val"] else evaluate(model, val, args, device)
    print(f"final validation loss {final:.3f} nats vs unigram baseline {baseline:.3f} "
          f"({math.exp(final):.2f} vs {math.exp(baseline):.2f} perplexity); checkpoint {checkpoint}")
    if args.sample:
        print("--- sample ---")
        print("def ", end="")
        sample(model, "def ", args.sample, device, echo=lambda char: print(char, end="", flush=True))
        print("\n--------------")
    png = plot_losses(history, out / "loss.png")
    if png:
        print(f"loss curve: {png}")
    return {"val_loss": final, "unigram": baseline, "history": history}


if __name__ == "__main__":
    main()
