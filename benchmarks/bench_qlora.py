"""A QLoRA training step of a ~100M-parameter Llama: ggrad on a q4_0 GGUF base beside PyTorch + peft on the same
model in bf16, in one run.

The model is bench_gguf_decode.py's (random, hidden 768, 10 layers, 12 / 4 heads, FFN 2048, vocabulary 32000,
112M parameters; `--size small` a 2-layer one for checking the script), written by `save_gguf` in --type (q4_0
by default). ggrad loads it with `ggrad.models.from_gguf` and trains LoRA adapters (r=16, alpha=32, on the
seven projections of each block) with AdamW, under `ggrad.autocast` bf16 where the device is a GPU. PyTorch
runs transformers' LlamaForCausalLM with the same weights (the file's, dequantized; in bf16 with torch.autocast
bf16 on a GPU, float32 on the CPU) and peft's LoRA on the same modules, with the same first lora_A (lora_B
starts at zero in both), the same batches and AdamW (benchmarks/qlora_torch.py). Each side runs in a child
process (PyTorch's CUDA libraries and a CUDA build of GGML in one process abort). A step is forward, cross
entropy over batch x seq tokens, backward and the optimizer step, ending in `loss.item()`; the median of --steps
steps after --warmup counts. Peak memory: on a GPU each side's device allocations (ggrad's `ggrad.stats()`
peak of the device: tensors and compute buffer; `torch.cuda.max_memory_allocated`), on the CPU each child's
peak RSS (everything the process held, the Python runtime and libraries included). Both sides' losses are
printed: with `--type f32` on the CPU (float32 everywhere) they agree, a check that both train the same model.

    python benchmarks/bench_qlora.py --device cuda:0 --threads 16 --steps 10       # the issue's figure
    python benchmarks/bench_qlora.py --device cpu --threads 2 --size small --type f32 --steps 4   # the check
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gguf_decode import placeholder_vocabulary  # noqa: E402
from common import print_table  # noqa: E402
from qlora_data import HF_OF, batches, peak_rss  # noqa: E402

import ggrad  # noqa: E402
from ggrad import models, nn, optim  # noqa: E402
from ggrad.ggml import decode, gguf  # noqa: E402
from ggrad.nn.lora import LoRALinear  # noqa: E402

SIZES = {"112M": dict(vocab_size=32000, hidden_size=768, num_layers=10, num_heads=12, num_kv_heads=4,
                      intermediate_size=2048),
         "small": dict(vocab_size=2048, hidden_size=256, num_layers=2, num_heads=4, num_kv_heads=2,
                       intermediate_size=512)}
TARGETS = tuple(HF_OF)
HERE = os.path.dirname(os.path.abspath(__file__))


def write_model(folder, c, dtype):
    """The random model of config `c` as a GGUF file of `dtype`; its parameter count."""
    ggrad.manual_seed(0)
    config = models.ModelConfig(architecture="llama", context_length=c["context"], norm_eps=1e-5,
                                head_dim=c["hidden_size"] // c["num_heads"],
                                extra={"general.name": "random-llama", **placeholder_vocabulary(c["vocab_size"])},
                                **{k: v for k, v in c.items() if k != "context"})
    model = models.LlamaModel(config)
    path = os.path.join(folder, f"llama-{dtype}.gguf")
    model.save_gguf(path, type=dtype)
    return path, sum(p.numel() for p in model.parameters())


def unpermute(w, heads):
    """llama.cpp's q/k rows (each head's rotated pairs adjacent) back in transformers' order (halves)."""
    return w.reshape(heads, w.shape[0] // heads // 2, 2, -1).swapaxes(1, 2).reshape(w.shape)


def write_torch_weights(path, c, r, out):
    """The file's tensors dequantized to float32 under transformers' names (q/k rows unpermuted), and each
    adapter's first lora_A (Kaiming uniform, as nn.LoRALinear's), into the .npz `out`."""
    file = gguf.read(path)
    arrays = {}
    for info in file.tensors:
        w = decode(file.read_data(info), info.dtype, info.shape).astype(np.float32, copy=False)
        name = info.name.removesuffix(".weight")
        if name == "token_embd":
            arrays["model.embed_tokens.weight"] = w
        elif name == "output_norm":
            arrays["model.norm.weight"] = w
        elif name == "output":
            arrays["lm_head.weight"] = w
        else:
            _, i, part = name.split(".")
            if part == "attn_q":
                w = unpermute(w, c["num_heads"])
            elif part == "attn_k":
                w = unpermute(w, c["num_kv_heads"])
            hf = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}.get(part, HF_OF.get(part))
            arrays[f"model.layers.{i}.{hf}.weight"] = w
    rng = np.random.default_rng(2)
    for i in range(c["num_layers"]):
        for part in TARGETS:
            fan_in = c["intermediate_size"] if part == "ffn_down" else c["hidden_size"]
            bound = 1.0 / np.sqrt(fan_in)
            arrays[f"lora.blk.{i}.{part}"] = rng.uniform(-bound, bound, (r, fan_in)).astype(np.float32)
    np.savez(out, **arrays)


def ggrad_child(args):
    """The ggrad side (in its own process): the model from the GGUF file, LoRA, the timed steps. PyTorch is not
    imported here (common.set_threads would): a process holding GGML's CUDA and PyTorch's aborts."""
    ggrad.set_num_threads(args["threads"])
    dev = ggrad.device(args["device"])
    c = args["config"]
    model = models.from_gguf(args["path"], device=dev, context=args["seq"])
    adapters = nn.lora_(model, r=args["r"], alpha=args["alpha"],
                        modules=lambda name, module: name.rsplit(".", 1)[-1] in TARGETS)
    first = np.load(args["weights"])
    with ggrad.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, LoRALinear):
                module.lora_A.copy_(ggrad.tensor(first[f"lora.{name}"], device=dev))
    model.gradient_checkpointing = args["checkpointing"]
    model.train()
    opt = optim.AdamW(adapters, lr=args["lr"], weight_decay=0.0)
    kind = dev.torch_name.split(":")[0]
    bf16 = args["precision"] == "bf16"
    losses, times = [], []
    for window in batches(c["vocab_size"], args["batch"], args["seq"], args["warmup"] + args["steps"]):
        ids, targets = ggrad.tensor(window[:, :-1], device=dev), ggrad.tensor(window[:, 1:].reshape(-1), device=dev)
        t0 = time.perf_counter()
        with ggrad.autocast(kind, dtype=ggrad.bfloat16, enabled=bf16):
            logits = model(ids)
        loss = ggrad.cross_entropy(logits.reshape(-1, c["vocab_size"]).float(), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        times.append(time.perf_counter() - t0)
    if dev.is_cpu:
        peak = peak_rss()
    else:
        peak = ggrad.stats()["memory"].get(dev.name, {}).get("peak", float("nan"))
    print(json.dumps({"times": times[args["warmup"]:], "losses": losses, "peak": peak,
                      "device": dev.description}))


def child(command, args):
    run = subprocess.run([sys.executable, *command, json.dumps(args)], capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{run.stderr[-4000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--size", choices=list(SIZES), default="112M")
    p.add_argument("--type", default="q4_0", help="the GGUF file's weight type (f32: the agreement check)")
    p.add_argument("--precision", choices=["auto", "bf16", "f32"], default="auto",
                   help="bf16: autocast (ggrad) / bf16 model under autocast (PyTorch); auto: bf16 on a GPU")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--r", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--checkpointing", action="store_true", help="activation checkpointing on both sides")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return ggrad_child(json.loads(args.child))
    on_cpu = args.device.split(":")[0] == "cpu"   # the device itself is left to the children
    precision = args.precision if args.precision != "auto" else ("f32" if on_cpu else "bf16")
    c = dict(SIZES[args.size], context=args.seq)
    common = dict(config=c, device=args.device, threads=args.threads, precision=precision, batch=args.batch,
                  seq=args.seq, r=args.r, alpha=2.0 * args.r, lr=args.lr, steps=args.steps, warmup=args.warmup,
                  targets=TARGETS, checkpointing=args.checkpointing)
    with tempfile.TemporaryDirectory() as folder:
        path, n = write_model(folder, c, args.type)
        weights = os.path.join(folder, "weights.npz")
        write_torch_weights(path, c, args.r, weights)
        mine = child([os.path.abspath(__file__), "--child"], dict(common, path=path, weights=weights))
        theirs = child([os.path.join(HERE, "qlora_torch.py")],
                       dict(common, weights=weights, device="cpu" if on_cpu else "cuda:0"))
    tokens = args.batch * args.seq
    g, t = statistics.median(mine["times"]), statistics.median(theirs["times"])
    what = "peak RSS" if on_cpu else "peak device memory"
    row = {"ggrad tok/s": f"{tokens / g:,.0f}", "torch tok/s": f"{tokens / t:,.0f}", "ratio": f"{t / g:.2f}",
           f"ggrad {what} MiB": f"{mine['peak'] / 2 ** 20:,.0f}",
           f"torch {what} MiB": f"{theirs['peak'] / 2 ** 20:,.0f}",
           "memory ratio": f"{mine['peak'] / theirs['peak']:.2f}"}
    base = f"{args.type} base"
    print_table(f"LoRA step (r={args.r}, {n / 1e6:.0f}M-parameter Llama, {base}, batch {args.batch} x seq {args.seq}, "
                f"{precision}{', checkpointed' if args.checkpointing else ''}): ggrad on {args.device} "
                f"({mine['device']}, {args.threads} threads) vs PyTorch + peft ({theirs['versions']}, "
                f"{'float32' if precision == 'f32' else 'bf16 weights'}); median of {args.steps} steps",
                [row], list(row))
    gap = np.abs(np.array(mine["losses"]) - np.array(theirs["losses"]))
    print("\nstep  ggrad loss  torch loss")
    for i, (a, b) in enumerate(zip(mine["losses"], theirs["losses"])):
        print(f"{i:4d}  {a:10.5f}  {b:10.5f}")
    print(f"largest loss difference {gap.max():.2e} ({gap.max() / np.abs(theirs['losses']).max():.1e} relative)")


if __name__ == "__main__":
    main()
