"""Fine-tune a llama.cpp GGUF model with LoRA on a text file, and write the adapter llama.cpp applies (--lora).

    python -m ggrad.examples.finetune_gguf MODEL.gguf TEXT_FILE [--steps 200 --lora-r 16 --device cuda:0]
    python -m ggrad.examples.finetune_gguf            # no download: a small Llama made here (see below)

The model is loaded in its own GGML types (`ggrad.models.from_gguf`); LoRA adapters go on every Linear of the
blocks (`ggrad.nn.lora_`, QLoRA on a quantized base) and AdamW trains them alone, with activation
checkpointing (`--checkpoint`) and autocast (`--autocast`, on GPUs) where asked. The run prints the
validation loss and a sample before and after, and writes the adapter (`ggrad.models.save_lora_gguf`) and,
with `--merged TYPE`, the merged model (`model.save_gguf`).

With no model given it first builds a small byte-level Llama (vocabulary: the 256 bytes, as a GPT-2 style
vocabulary without merges, so llama.cpp reads it too), trains it briefly from scratch on the standard
library's Python source (found at run time, as the char-GPT example does), writes it to GGUF in q8_0 and
fine-tunes that file on the text (default: the standard library's LICENSE.txt, prose after code).
"""

import argparse
import sys
import sysconfig
import time
import zlib
from pathlib import Path

import numpy as np
from tqdm import tqdm

import ggrad
from ggrad import models, nn, optim

# ---- text <-> token ids ---------------------------------------------------------------------------------


def _byte_symbols():
    """GPT-2's printable stand-in for each byte (its byte-level BPE vocabulary's single-byte tokens)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    symbols, extra = {}, 0
    for b in range(256):
        if b in keep:
            symbols[b] = chr(b)
        else:
            symbols[b] = chr(256 + extra)
            extra += 1
    return [symbols[b] for b in range(256)]


BYTE_TOKENS = _byte_symbols()


class ByteTokenizer:
    """Text as its UTF-8 bytes, one token each: the vocabulary of the model built here."""

    def encode(self, text):
        return list(text.encode("utf-8"))

    def decode(self, ids):
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")


def byte_vocabulary_metadata():
    """llama.cpp's tokenizer keys for the byte vocabulary (GPT-2 style, no merges, no BOS added)."""
    return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "default", "tokenizer.ggml.tokens": BYTE_TOKENS,
            "tokenizer.ggml.token_type": np.ones(256, dtype=np.int32), "tokenizer.ggml.merges": [""],
            "tokenizer.ggml.bos_token_id": np.uint32(0), "tokenizer.ggml.eos_token_id": np.uint32(0),
            "tokenizer.ggml.add_bos_token": False}


def file_tokenizer(path, metadata):
    """The tokenizer of GGUF file `path`: `encode(text) -> ids`, `decode(ids) -> text`: the byte vocabulary of
    the model built here read directly, any other by the file's own (ggrad.models.Tokenizer)."""
    if metadata.get("tokenizer.ggml.tokens") == BYTE_TOKENS:
        return ByteTokenizer()
    return models.Tokenizer.from_gguf(path)


# ---- data ---------------------------------------------------------------------------------------------


def stdlib_source(max_bytes=4 << 20, val_fraction=0.05):
    """(train, val) bytes of the standard library's .py files, split by file (a hash of the path)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    train, val, total = [], [], 0
    for f in sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts):
        try:
            data = np.frombuffer(f.read_bytes(), dtype=np.uint8)
        except OSError:
            continue
        (val if zlib.crc32(str(f.relative_to(root)).encode()) % 1000 < val_fraction * 1000 else train).append(data)
        total += len(data)
        if total >= max_bytes:
            break
    return np.concatenate(train).astype(np.int32), np.concatenate(val).astype(np.int32)


def default_text():
    path = Path(sysconfig.get_paths()["stdlib"]) / "LICENSE.txt"
    if not path.exists():
        raise SystemExit("no TEXT_FILE given and the standard library has no LICENSE.txt: pass a text file")
    return path


def split_text(ids, context, val_fraction=0.1):
    """(train, val) token ids: the last tenth (at least two windows) for validation."""
    n_val = max(int(len(ids) * val_fraction), 2 * (context + 1))
    if len(ids) < n_val + 2 * (context + 1):
        raise SystemExit(f"the text has {len(ids)} tokens: too short for windows of {context + 1}")
    return ids[:-n_val], ids[-n_val:]


def windows(data, batch, context, rng):
    starts = rng.integers(0, len(data) - context - 1, batch)
    w = np.stack([data[s:s + context + 1] for s in starts]).astype(np.int32)
    return w[:, :-1], w[:, 1:]


def loss_of(model, x, y, device):
    logits = model(ggrad.tensor(x, device=device))
    return ggrad.cross_entropy(logits.reshape(-1, logits.shape[-1]), ggrad.tensor(y.reshape(-1), device=device))


def evaluate(model, data, args, device, n_batches=8):
    rng = np.random.default_rng(1)
    was = model.training
    model.eval()
    with ggrad.no_grad():
        losses = [loss_of(model, *windows(data, args.batch, args.context, rng), device) for _ in range(n_batches)]
    model.train(was)
    return float(np.mean([loss.item() for loss in losses]))


def sample(model, tokenizer, prompt, n, device, seed=0):
    ggrad.manual_seed(seed)
    ids = ggrad.tensor(np.array([tokenizer.encode(prompt)], dtype=np.int32), device=device)
    out = model.generate(ids, n, temperature=0.8, top_k=40)
    return tokenizer.decode(out.numpy()[0])


def train(model, params, data, args, device, steps, lr, label):
    """AdamW on `params` for `steps` steps, with a progress bar; the last losses."""
    opt = optim.AdamW(params, lr=lr, weight_decay=0.0)
    schedule = optim.lr_scheduler.WarmupCosineLR(opt, warmup_steps=max(1, steps // 10), total_steps=steps,
                                                 min_lr=lr * 0.1)
    rng = np.random.default_rng(args.seed)
    bar = tqdm(range(steps), desc=label, dynamic_ncols=True, file=sys.stdout)
    t0, pending, last = time.perf_counter(), [], []
    for step in bar:
        x, y = windows(data, args.batch, args.context, rng)
        with ggrad.autocast(ggrad.device(device).torch_name.split(":")[0], enabled=args.autocast):
            loss = loss_of(model, x, y, device)
        opt.zero_grad()
        loss.backward()
        opt.step()
        schedule.step()
        pending.append(loss)
        if (step + 1) % 10 == 0 or step + 1 == steps:
            last = [p.item() for p in pending]
            tokens = len(pending) * args.batch * args.context
            bar.set_postfix(loss=f"{last[-1]:.3f}", tok_s=f"{tokens / (time.perf_counter() - t0):,.0f}")
            t0, pending = time.perf_counter(), []
    bar.close()
    return last


# ---- the model built here -----------------------------------------------------------------------------


def build_base(args, path, device):
    """A small byte-level Llama trained from scratch on the standard library's source, written to `path`."""
    config = models.ModelConfig(architecture="llama", vocab_size=256, hidden_size=args.hidden, num_layers=args.layers,
                                num_heads=args.heads, num_kv_heads=max(1, args.heads // 2),
                                intermediate_size=3 * args.hidden, context_length=args.context, norm_eps=1e-5,
                                head_dim=args.hidden // args.heads,
                                extra={"general.name": "ggrad byte llama", **byte_vocabulary_metadata()})
    model = models.LlamaModel(config).to(device)
    corpus_train, corpus_val = stdlib_source()
    print(f"no model given: a {sum(p.numel() for p in model.parameters()):,}-parameter byte-level Llama, "
          f"pretrained on {len(corpus_train):,} bytes of the standard library's source")
    train(model, list(model.parameters()), corpus_train, args, device, args.pretrain_steps, 3e-3, "pretrain")
    print(f"pretrained: validation loss {evaluate(model, corpus_val, args, device):.3f} nats on held-out source")
    model.save_gguf(path, type=args.base_type)
    print(f"written: {path} ({args.base_type})")
    return path


# ---- main ---------------------------------------------------------------------------------------------


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="LoRA fine-tuning of a llama.cpp GGUF model on a text file.")
    p.add_argument("model", nargs="?", default=None, help="a llama/qwen2 .gguf (default: build a small one)")
    p.add_argument("text", nargs="?", default=None, help="the text to fine-tune on (default: the stdlib LICENSE)")
    p.add_argument("--steps", type=int, default=160, help="fine-tuning steps")
    p.add_argument("--lora-r", type=int, default=8)
    p.add_argument("--lora-alpha", type=float, default=16.0)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--checkpoint", action="store_true", help="recompute each block in the backward pass")
    p.add_argument("--autocast", action="store_true", help="mixed precision (f16 on GPUs, bf16 on the CPU)")
    p.add_argument("--merged", default=None, metavar="TYPE", help="also write the merged model in this GGML type")
    p.add_argument("--out", default="runs/finetune_gguf")
    p.add_argument("--sample", type=int, default=120, help="tokens sampled before and after")
    p.add_argument("--seed", type=int, default=0)
    built = p.add_argument_group("the model built when none is given")
    built.add_argument("--pretrain-steps", type=int, default=400)
    built.add_argument("--hidden", type=int, default=128)
    built.add_argument("--layers", type=int, default=3)
    built.add_argument("--heads", type=int, default=4)
    built.add_argument("--base-type", default="q8_0", help="GGML type of its weights in the file")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    ggrad.manual_seed(args.seed)
    device = ggrad.device(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = Path(args.model) if args.model else build_base(args, out / "base.gguf", device)
    model = models.from_gguf(path, device=device)
    tokenizer = file_tokenizer(path, model.config.extra)
    text_path = Path(args.text) if args.text else default_text()
    ids = np.array(tokenizer.encode(text_path.read_text(encoding="utf-8", errors="replace")), dtype=np.int32)
    data, val = split_text(ids, args.context)
    c = model.config
    print(f"model: {path} ({c.architecture}, {c.num_layers} layers, hidden {c.hidden_size}, vocab {c.vocab_size}); "
          f"text: {text_path} ({len(data):,} train / {len(val):,} validation tokens)")
    prompt = tokenizer.decode(val[:24])
    before_loss = evaluate(model, val, args, device)
    before = sample(model, tokenizer, prompt, args.sample, device, args.seed) if args.sample else ""
    adapters = nn.lora_(model, r=args.lora_r, alpha=args.lora_alpha,
                        modules=lambda name, module: name.startswith("blk."))
    model.gradient_checkpointing = args.checkpoint
    trainable = sum(p.numel() for p in adapters)
    print(f"LoRA r={args.lora_r}: {trainable:,} trainable parameters on a frozen base "
          f"({sum(p.numel() for p in model.parameters()) - trainable:,})")
    train(model, adapters, data, args, device, args.steps, args.lr, "fine-tune")
    after_loss = evaluate(model, val, args, device)
    after = sample(model, tokenizer, prompt, args.sample, device, args.seed) if args.sample else ""
    print(f"validation loss: before {before_loss:.3f}, after {after_loss:.3f} nats")
    if args.sample:
        print(f"--- sample before ---\n{before}\n--- sample after ---\n{after}\n---")
    adapter = out / "adapter.gguf"
    models.save_lora_gguf(model, adapter)
    print(f"adapter: {adapter} (llama.cpp: llama-cli -m {path} --lora {adapter})")
    if args.merged:
        merged = out / f"merged-{args.merged}.gguf"
        model.save_gguf(merged, type=args.merged)
        print(f"merged model: {merged}")
    return {"val_before": before_loss, "val_after": after_loss, "adapter": adapter, "model": path}


if __name__ == "__main__":
    main()
