"""Decoding a ~100M-parameter Llama from GGUF: ggrad (ggrad.models) beside llama.cpp (llama-cpp-python) on the
same file, the same threads.

The model is built here with random weights (hidden 768, 10 layers, 12 heads / 4 key-value heads, FFN 2048,
vocabulary 32000, untied output: 112M parameters) and written with `save_gguf` in each type (q8_0, q4_0),
with a GPT-2 style vocabulary of placeholder tokens so that llama.cpp loads it; both sides are fed token ids.
Per type: prompt processing (tokens/s of one forward over a --prompt-token prompt) and greedy decoding
(tokens/s of --new tokens after it: ggrad's `generate`, the decode step replayed per token, its KV cache
of --context positions; llama.cpp's `eval` one token at a time, in a child process, the argmax of its one row
of logits taken on the host). The fastest of --repeats runs (after a warm-up run) counts. On a machine
shared with other work the decode ratio is also given in process CPU time (tokens per CPU second of each
side, which others' load stretches less than wall time; at one thread it is the compute's own, at more it
counts the threads' waits too). Without llama-cpp-python ggrad is reported alone, and the table says so. ggrad loads with `repack=True` (its default:
weights GGML's CPU has an interleaved layout for are multiplied through CPU_REPACK copies, as llama.cpp
does); `--one-copy` adds ggrad's figures with `repack=False` (the file's layout only).

    python benchmarks/bench_gguf_decode.py [--types q8_0 q4_0] [--threads 2] [--repeats 3] [--one-copy]
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import print_table, set_threads  # noqa: E402

import ggrad  # noqa: E402
from ggrad import models  # noqa: E402

HAVE_LLAMA_CPP = importlib.util.find_spec("llama_cpp") is not None   # else ggrad is reported alone

CONFIG = dict(vocab_size=32000, hidden_size=768, num_layers=10, num_heads=12, num_kv_heads=4, intermediate_size=2048)


def placeholder_vocabulary(n):
    """llama.cpp's tokenizer keys for `n` distinct placeholder tokens (GPT-2 style, one merge)."""
    return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "default",
            "tokenizer.ggml.tokens": [f"<t{i}>" for i in range(n)],
            "tokenizer.ggml.token_type": np.ones(n, dtype=np.int32), "tokenizer.ggml.merges": ["< t"],
            "tokenizer.ggml.bos_token_id": np.uint32(1), "tokenizer.ggml.eos_token_id": np.uint32(2),
            "tokenizer.ggml.add_bos_token": False}


def write_model(folder, dtype, context):
    ggrad.manual_seed(0)
    config = models.ModelConfig(architecture="llama", context_length=context, norm_eps=1e-5,
                                head_dim=CONFIG["hidden_size"] // CONFIG["num_heads"],
                                extra={"general.name": "random-llama-112M",
                                       **placeholder_vocabulary(CONFIG["vocab_size"])}, **CONFIG)
    model = models.LlamaModel(config)
    path = os.path.join(folder, f"llama-112M-{dtype}.gguf")
    model.save_gguf(path, type=dtype)
    return path, sum(p.numel() for p in model.parameters())


def best(xs):
    """The fastest run: on a shared machine the others are slowed by its load, not by the work."""
    return float(np.min(xs))


def ggrad_run(path, prompt, new, repeats, context, repack=True):
    model = models.from_gguf(path, context=context, repack=repack)
    ids = ggrad.tensor(prompt[None])
    with ggrad.no_grad():
        model(ids, last_only=True).numpy()   # warm-up
        prefill = []
        for _ in range(repeats):   # the last position's logits, as llama.cpp computes them
            t0 = time.perf_counter()
            model(ids, last_only=True).numpy()
            prefill.append(time.perf_counter() - t0)
    decode, cpu, tokens = [], [], None
    for _ in range(repeats + 1):   # the first run records the decode step
        stream = model.generate(ids, new + 1, temperature=0, stream=True)
        out = [next(stream)]          # after the prompt's graph
        t0, c0 = time.perf_counter(), time.process_time()
        out += list(stream)
        decode.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        tokens = np.array(out)[:, 0]
    return len(prompt) / best(prefill), new / best(decode[1:]), new / best(cpu[1:]), tokens


# llama.cpp in a child process (its GGML is another build than ggrad's): prompt, then one token per eval
LLAMA_CPP_CHILD = """
import json, sys, time
import numpy as np
import llama_cpp
path, prompt, new, repeats, context, threads = json.loads(sys.argv[1])
llm = llama_cpp.Llama(model_path=path, n_ctx=context, n_batch=len(prompt), n_threads=threads,
                      n_threads_batch=threads, verbose=False)
vocab = llm.n_vocab()


def last_argmax():   # the one row of logits llama.cpp computed (the last token's)
    return int(np.argmax(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(vocab,))))


prefill, decode, cpu = [], [], []
for _ in range(repeats + 1):
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(prompt)
    prefill.append(time.perf_counter() - t0)
    out = [last_argmax()]
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(new):
        llm.eval([out[-1]])
        out.append(last_argmax())
    decode.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
print(json.dumps([prefill[1:], decode[1:], cpu[1:], out]))
"""


def llama_cpp_run(path, prompt, new, repeats, context, threads):
    args = json.dumps([path, [int(i) for i in prompt], new, repeats, context, threads])
    run = subprocess.run([sys.executable, "-c", LLAMA_CPP_CHILD, args], capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"llama-cpp-python failed on {path}:\n{run.stderr[-3000:]}")
    prefill, decode, cpu, tokens = json.loads(run.stdout.strip().splitlines()[-1])
    return len(prompt) / best(prefill), new / best(decode), new / best(cpu), np.array(tokens)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--types", nargs="+", default=["q8_0", "q4_0"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--prompt-tokens", type=int, default=64)
    p.add_argument("--new", type=int, default=64)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--one-copy", action="store_true", help="also time ggrad with repack=False")
    args = p.parse_args()
    set_threads(args.threads)
    prompt = np.random.default_rng(0).integers(3, CONFIG["vocab_size"], args.prompt_tokens).astype(np.int32)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for dtype in args.types:
            path, n = write_model(folder, dtype, args.context)
            pp, tg, tg_cpu, ours = ggrad_run(path, prompt, args.new, args.repeats, args.context)
            row = {"type": dtype, "params": f"{n / 1e6:.0f}M", "ggrad pp tok/s": f"{pp:.0f}",
                   "ggrad decode tok/s": f"{tg:.1f}"}
            if args.one_copy:
                pp1, tg1, _, _ = ggrad_run(path, prompt, args.new, args.repeats, args.context, repack=False)
                row.update({"one-copy pp tok/s": f"{pp1:.0f}", "one-copy decode tok/s": f"{tg1:.1f}"})
            if HAVE_LLAMA_CPP:
                lpp, ltg, ltg_cpu, theirs = llama_cpp_run(path, prompt, args.new, args.repeats, args.context,
                                                          args.threads)
                same = int(np.argmax(ours != theirs)) if (ours != theirs).any() else len(ours)
                row.update({"llama.cpp pp tok/s": f"{lpp:.0f}", "llama.cpp decode tok/s": f"{ltg:.1f}",
                            "decode ratio": f"{tg / ltg:.2f}", "pp ratio": f"{pp / lpp:.2f}",
                            "decode ratio, CPU time": f"{tg_cpu / ltg_cpu:.2f}",
                            "same greedy tokens": f"{same}/{len(ours)}"})
            rows.append(row)
    note = "" if HAVE_LLAMA_CPP else " (llama-cpp-python not installed: ggrad alone)"
    print_table(f"GGUF decoding, {args.threads} threads, prompt {args.prompt_tokens}, {args.new} new tokens{note}",
                rows, list(rows[0]))


if __name__ == "__main__":
    main()
