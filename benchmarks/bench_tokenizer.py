"""Tokenizer speed: ggrad.models.Tokenizer (pure Python) vs `tokenizers` (Rust) on the same vocabulary.

Vocabularies are trained here with `tokenizers` on Python's standard library source (no download), written
to GGUF as in tests/models/tokenizer_vocabs.py: byte-level BPEs with the llama3 pre-tokenizer (words that
are tokens skip the merges) and the qwen2 one (every word merged), and a SentencePiece-style BPE, each
`--vocab` tokens. Both tokenizers encode the same `--kb` kB of other stdlib
source; the ids are checked equal, the times are the median of `--repeat` runs
of a fresh tokenizer (cold: ggrad's word cache empty) and of a second pass (warm cache).

    python benchmarks/bench_tokenizer.py [--kb 100 --vocab 8000 --repeat 3]
"""

import argparse
import os
import pathlib
import statistics
import sys
import sysconfig
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "models"))

import tokenizer_vocabs as tv  # noqa: E402
from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402
import tokenizers  # noqa: E402

from ggrad.models import Tokenizer  # noqa: E402


def stdlib_text(kb, reverse=False):
    """`kb` kB of the standard library's source, from its first modules (or its last ones)."""
    files = sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py"), reverse=reverse)
    out, size = [], 0
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        out.append(text)
        size += len(text.encode())
        if size >= kb * 1024:
            break
    return "".join(out)[:kb * 1024]


def byte_level(train, vocab_size, pre="llama3"):
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(tv.HF_PATTERNS[pre]), "isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.train_from_iterator([train], trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    vocab = tok.get_vocab()
    tokens = sorted(vocab, key=vocab.get)
    merges = tv._merges_of(tok)
    ref = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=pre == "llama3"))
    ref.pre_tokenizer = tok.pre_tokenizer
    keys = {"pre": "llama-bpe" if pre == "llama3" else pre}
    return tv.Vocab(tokens, [1] * len(tokens), ref, merges=[f"{a} {b}" for a, b in merges]), keys


def sentencepiece(train, vocab_size):
    tok = tokenizers.Tokenizer(models.BPE())
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.train_from_iterator([train], trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                                         limit_alphabet=200))
    learned = tok.get_vocab()
    pieces = sorted(learned, key=learned.get)
    head = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens = head + pieces
    scores = [0.0] * len(head) + [-float(k) for k in range(len(pieces))]
    score, normal = dict(zip(tokens, scores)), set(pieces)
    merges = sorted(((p[:k], p[k:]) for p in pieces for k in range(1, len(p)) if p[:k] in normal and p[k:] in normal),
                    key=lambda m: -score[m[0] + m[1]])
    ref = tokenizers.Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges,
                                          unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    ref.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    ref.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in head[:3]])
    types = [2, 3, 3] + [6] * 256 + [1] * len(pieces)
    return tv.Vocab(tokens, types, ref, scores=scores), {}


def timed(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=int, default=100)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    train, text = stdlib_text(1024), stdlib_text(args.kb, reverse=True)
    print(f"text: {len(text.encode()) / 1024:.0f} kB of stdlib source; vocabulary: {args.vocab} tokens")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (vocab, keys), model in (("byte-level BPE, llama3", byte_level(train, args.vocab), "gpt2"),
                                           ("byte-level BPE, qwen2", byte_level(train, args.vocab, "qwen2"), "gpt2"),
                                           ("SentencePiece BPE", sentencepiece(train, args.vocab), "llama")):
            path = vocab.write(os.path.join(tmp, "v.gguf"), model, **keys)
            loads, colds = [], []
            for _ in range(args.repeat):
                t_load, tok = timed(lambda: Tokenizer.from_gguf(path), 1)
                cold, ids = timed(lambda: tok.encode(text, add_bos=False), 1)
                loads.append(t_load)
                colds.append(cold)
            load, cold = statistics.median(loads), statistics.median(colds)
            warm, _ = timed(lambda: tok.encode(text, add_bos=False), args.repeat)
            rust, ref_ids = timed(lambda: vocab.reference_ids(text), args.repeat)
            same = "equal" if ids == ref_ids else "DIFFERENT"
            decode, _ = timed(lambda: tok.decode(ids), args.repeat)
            print(f"{name}: {len(ids)} tokens, ids {same}; ggrad: load {load * 1e3:.0f} ms, encode "
                  f"{cold * 1e3:.0f} ms (cache cold) / {warm * 1e3:.0f} ms (warm), decode {decode * 1e3:.0f} ms; "
                  f"tokenizers encode {rust * 1e3:.1f} ms; ggrad/tokenizers {cold / rust:.1f}x cold, "
                  f"{warm / rust:.1f}x warm")


if __name__ == "__main__":
    main()
