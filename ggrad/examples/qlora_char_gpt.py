"""QLoRA on the char-GPT: quantize a trained model's weights, then fine-tune low-rank adapters only.

The base model comes from the char-GPT example's checkpoint (`--checkpoint`, as `char_gpt` writes it),
or is trained here first with `char_gpt` itself (`--pretrain-steps`, same architecture flags). Its
Linear, Embedding and attention weights are then quantized in place (`nn.quantize_`), every parameter
is frozen and each Linear gets a LoRA adapter (`nn.lora_`); AdamW trains the adapters alone. The run
prints the validation loss of the float model, of the quantized one and after fine-tuning, and checks
that the base (quantized weights, biases, norms) is bit for bit what it was.

    python examples/qlora_char_gpt.py                        # pretrains 600 steps, fine-tunes 300
    python examples/qlora_char_gpt.py --checkpoint runs/char_gpt/checkpoint.gguf --type q4_0 --steps 300
"""

import argparse
import sys
from pathlib import Path

import numpy as np

import ggrad
from ggrad import nn, optim
from ggrad.autograd.raw import to_raw
from ggrad.examples import char_gpt


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="QLoRA: LoRA adapters on a quantized char-GPT.")
    p.add_argument("--checkpoint", default=None, help="a char_gpt checkpoint.gguf (default: pretrain one)")
    p.add_argument("--pretrain-steps", type=int, default=600)
    p.add_argument("--type", default="q4_0", help="GGML quantization type of the base weights")
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--alpha", type=float, default=16.0)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--corpus", default=None, help="a text file or a folder of .py files (default: the stdlib)")
    p.add_argument("--out", default="runs/qlora_char_gpt")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def base_model(args):
    """The float CharGPT: loaded from --checkpoint, or pretrained now by the char_gpt example."""
    checkpoint = Path(args.checkpoint) if args.checkpoint else Path(args.out) / "pretrain" / "checkpoint.gguf"
    if not args.checkpoint:
        char_gpt.main(["--steps", str(args.pretrain_steps), "--d-model", str(args.d_model), "--layers",
                       str(args.layers), "--heads", str(args.heads), "--context", str(args.context), "--batch",
                       str(args.batch), "--eval-every", str(max(args.pretrain_steps, 1)), "--sample", "0",
                       "--seed", str(args.seed), "--out", str(checkpoint.parent)]
                      + (["--corpus", args.corpus] if args.corpus else []))
    model = char_gpt.CharGPT(len(char_gpt.VOCAB), args.d_model, args.layers, args.heads, args.context)
    model.load_state_dict(ggrad.load(checkpoint)["model"])
    return model


def finetune(model, adapters, train, args):
    """AdamW on the adapters for args.steps steps; the training losses."""
    opt = optim.AdamW(adapters, lr=args.lr, weight_decay=0.0)
    rng = np.random.default_rng(args.seed + 1)
    losses = []
    for _ in range(args.steps):
        x, y = char_gpt.batches(train, args.batch, args.context, rng)
        logits = model(ggrad.tensor(x))
        loss = ggrad.cross_entropy(logits.reshape(-1, len(char_gpt.VOCAB)), ggrad.tensor(y.reshape(-1)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)
    return [loss.item() for loss in losses]


def main(argv=None):
    args = parse_args(argv)
    ggrad.manual_seed(args.seed)
    train, val = char_gpt.load_corpus(args.corpus)
    model = base_model(args)
    val_float = char_gpt.evaluate(model, val, args, "cpu")
    nn.quantize_(model, args.type)
    val_quantized = char_gpt.evaluate(model, val, args, "cpu")
    adapters = nn.lora_(model, r=args.rank, alpha=args.alpha)
    ids = {id(p) for p in adapters}
    base = {n: to_raw(p).tobytes() for n, p in model.named_parameters() if id(p) not in ids}
    n_base, n_adapter = sum(p.numel() for p in model.parameters()) - sum(p.numel() for p in adapters), \
        sum(p.numel() for p in adapters)
    print(f"{args.type} base: {n_base:,} frozen parameters; LoRA r={args.rank}: {n_adapter:,} trainable "
          f"({100 * n_adapter / n_base:.1f}%)")
    losses = finetune(model, adapters, train, args)
    val_tuned = char_gpt.evaluate(model, val, args, "cpu")
    unchanged = all(to_raw(p).tobytes() == base[n] for n, p in model.named_parameters() if id(p) not in ids)
    k = max(1, min(20, len(losses) // 4))
    print(f"fine-tuning train loss: first {k} steps {np.mean(losses[:k]):.4f}, last {k} {np.mean(losses[-k:]):.4f}")
    print(f"validation loss: float {val_float:.4f}, {args.type} {val_quantized:.4f}, {args.type} + LoRA "
          f"{val_tuned:.4f}")
    print(f"base parameters bit for bit unchanged: {unchanged}")
    return {"val_float": val_float, "val_quantized": val_quantized, "val_tuned": val_tuned, "losses": losses,
            "base_unchanged": unchanged}


if __name__ == "__main__":
    sys.exit(0 if main()["base_unchanged"] else 1)
