"""Small vocabularies made by the tests, written into GGUF files in llama.cpp's keys, each beside a
`tokenizers` reference built from the same vocabulary (no download).

- `byte_level(pre)`: a byte-level BPE trained with `tokenizers` on a few paragraphs, its merges and
  tokens as a "gpt2" vocabulary; the reference runs the pre-tokenizer regexes of the models'
  tokenizer.json files (as published, `(?i:...)` and all) through `tokenizers`' own regex engine.
- `sentencepiece()`: a SentencePiece-style BPE (▁ for spaces, scores, <0xNN> byte fallback) as a "llama"
  vocabulary; the reference is `tokenizers`' BPE with the merges transformers' converter derives from
  SentencePiece scores (every split of a piece into two pieces, ranked by the piece's score), byte
  fallback, and the "▁" prefix normalizer of Llama's tokenizer.json.
"""

import json

import numpy as np
import pytest

tokenizers = pytest.importorskip("tokenizers")
gguf = pytest.importorskip("gguf")
from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

CORPUS = """\
The quick brown fox jumps over the lazy dog. It's a sunny day, isn't it? We'll see; they've gone and I'm here.
Don't worry: the tokenizer doesn't know what you'd say, but it'll learn the pieces that repeat again and again.
Numbers like 12345, 2024-01-31 and 3.14159 appear in text; so do prices ($9.99) and percentages (45%).
Café, naïve, façade, résumé, Zürich, São Paulo, Ærøskøbing — accents everywhere.
日本語のテキストと中文文本，还有한국어 텍스트. Emoji too: 🙂🚀👍🏽 and symbols ∑ ≤ ≥ ∞ ©.
    def tokenize(text):
        return [piece for piece in text.split()]  # code with indentation
\tTabs\tand\r\nCRLF line endings\n\n\nand blank lines.
"""
PARAGRAPHS = [CORPUS] * 3 + [line for line in CORPUS.splitlines()] + [CORPUS.lower(), CORPUS.upper()]

# tokenizer.json pre-tokenizer patterns as the models publish them
HF_PATTERNS = {
    "gpt2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    "llama3": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}
# llama.cpp's "default" pre-tokenizer: four regexes in turn
DEFAULT_PATTERNS = [r"[\p{P}\$\+<=>\^~\|]+", HF_PATTERNS["gpt2"], r"\p{N}+", r"[0-9][0-9][0-9]"]

CONTROL, USER_DEFINED, UNKNOWN, BYTE, NORMAL = 3, 4, 2, 6, 1


def _merges_of(tokenizer):
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in merges]


def write_gguf(path, model, tokens, types=None, scores=None, merges=None, pre=None, **keys):
    """A GGUF file holding only a vocabulary, in llama.cpp's keys (`keys`: add_bos_token=True, bos_token_id=1...)."""
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_tokenizer_model(model)
    if pre is not None:
        writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    if types is not None:
        writer.add_token_types(types)
    if scores is not None:
        writer.add_token_scores(scores)
    if merges is not None:
        writer.add_token_merges(merges)
    for key, value in keys.items():
        getattr(writer, {"add_bos_token": "add_add_bos_token", "add_eos_token": "add_add_eos_token",
                         "unknown_token_id": "add_unk_token_id", "padding_token_id": "add_pad_token_id"}
                .get(key, "add_" + key))(value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


class Vocab:
    """A test vocabulary: tokens, types, scores, merges (GGUF side) and `reference` (a tokenizers.Tokenizer
    whose BPE model was made with `options` and `ref_merges`)."""

    def __init__(self, tokens, types, reference, scores=None, merges=None, options=None, ref_merges=None):
        self.tokens, self.types, self.scores, self.merges, self.reference = tokens, types, scores, merges, reference
        self.options, self.ref_merges = options, ref_merges

    def extended(self, token, score=0.0, ref_merges=()):
        """This vocabulary with one more normal token (last id), `ref_merges` put first in the reference's."""
        tokens, merged = self.tokens + [token], list(ref_merges) + self.ref_merges
        reference = tokenizers.Tokenizer.from_str(self.reference.to_str())
        reference.model = models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merged, **self.options)
        scores = None if self.scores is None else self.scores + [score]
        return Vocab(tokens, self.types + [NORMAL], reference, scores, self.merges, self.options, merged)

    def write(self, path, model, **keys):
        return write_gguf(path, model, self.tokens, self.types, self.scores, self.merges, **keys)

    def reference_ids(self, text, parse_special=False):
        """The reference's ids of `text` (no BOS), control tokens parsed or not."""
        self.reference.encode_special_tokens = not parse_special
        return self.reference.encode(text, add_special_tokens=False).ids


SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]   # control tokens
USER = ["<user_tag>"]                                        # a user-defined token


def _trained_byte_level():
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=700, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(PARAGRAPHS, trainer)
    vocab = tok.get_vocab()
    tokens = sorted(vocab, key=vocab.get)
    return tokens, _merges_of(tok)


def byte_level(pre):
    """A "gpt2" vocabulary with `pre`'s pre-tokenizer ("gpt2", "llama3", "qwen2" or "default") and its reference."""
    tokens, merges = _trained_byte_level()
    tokens = tokens + SPECIALS + USER
    types = [NORMAL] * (len(tokens) - len(SPECIALS) - len(USER)) + [CONTROL] * len(SPECIALS) + [USER_DEFINED]
    options = {"ignore_merges": pre == "llama3"}
    ref = tokenizers.Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, **options))
    if pre == "gpt2":
        ref.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        patterns = DEFAULT_PATTERNS if pre == "default" else [HF_PATTERNS[pre]]
        ref.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(p), behavior="isolated") for p in patterns]
            + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    ref.decoder = decoders.ByteLevel()
    ref.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    ref.add_tokens([AddedToken(t, special=False, normalized=False) for t in USER])
    return Vocab(tokens, types, ref, merges=[f"{a} {b}" for a, b in merges], options=options, ref_merges=merges)


def sentencepiece():
    """A "llama" vocabulary: <unk> <s> </s>, 256 byte tokens, trained pieces scored by merge order."""
    trainer_tok = tokenizers.Tokenizer(models.BPE())
    trainer_tok.normalizer = normalizers.Replace(" ", "\u2581")
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    # the alphabet leaves out rare characters (CJK, emoji) so that they fall back to bytes
    trainer = trainers.BpeTrainer(vocab_size=600, min_frequency=2, show_progress=False, limit_alphabet=70)
    trainer_tok.train_from_iterator(PARAGRAPHS, trainer)
    learned = trainer_tok.get_vocab()
    # limit_alphabet breaks ties between equally rare characters in a random order (a Rust HashMap's): pieces
    # of CJK or emoji characters are dropped so that those always fall back to bytes
    pieces = [p for p in sorted(learned, key=learned.get) if all(ord(c) < 0x2E80 for c in p)]
    head = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens = head + pieces + USER
    types = [UNKNOWN, CONTROL, CONTROL] + [BYTE] * 256 + [NORMAL] * len(pieces) + [USER_DEFINED]
    scores = [0.0] * len(head) + [-float(k) for k in range(len(pieces))] + [0.0]
    score = dict(zip(tokens, scores))
    normal = set(pieces)
    # transformers' SentencePiece converter: every split of a piece into two pieces, by the piece's score
    merges = sorted(((p[:k], p[k:]) for p in pieces for k in range(1, len(p))
                     if p[:k] in normal and p[k:] in normal), key=lambda m: -score[m[0] + m[1]])
    options = {"unk_token": "<unk>", "byte_fallback": True, "fuse_unk": True}
    ref = tokenizers.Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, **options))
    ref.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    ref.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    ref.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ("<unk>", "<s>", "</s>")])
    ref.add_tokens([AddedToken(t, special=False, normalized=False) for t in USER])
    return Vocab(tokens, types, ref, np.asarray(scores, np.float32).tolist(), options=options, ref_merges=merges)


# Strings both sides tokenize: ASCII, accents, CJK, emoji, digit runs, whitespace runs, newlines, contractions
STRINGS = [
    "Hello world", "hello", " leading space", "trailing space ", "  two leading", "many     spaces   here",
    "The quick brown fox jumps over the lazy dog.", "Don't you think it's fine? We'll see; they've gone.",
    "I'M SHOUTING, DON'T", "rock'n'roll 'quoted' ''double''", "naïve café résumé façade Zürich",
    "日本語のテキスト", "中文文本，还有한국어", "emoji 🙂🚀👍🏽 mixed", "∑ ≤ ≥ ∞ ©", "12345678901234567890",
    "3.14159 and 2024-01-31", "$9.99 (45%)", "a\nb", "line\n\n\nblank", "crlf\r\nend", "\ttab\tseparated",
    "    indented code", "def f(x):\n    return x  # comment\n", "x  \n  y", "\n", " ", "   ", "", "a",
    "Ærøskøbing", "mixed123abc456", "under_score and-dash", "zero\u200bwidth", "nbsp\u00a0here",
    "ideographic\u3000space", "combining e\u0301 accent", "CJK数字123と英語abc", "<<html>> &amp; [brackets]",
    "UPPER lower MiXeD", "!!!???...", "can't won't shan't y'all", "it'S THEY'RE", "\u2028line sep",
]
SPECIAL_STRINGS = [
    "<|im_start|>user\nHello<|im_end|>", "text<|endoftext|>more", "<|endoftext|>", "a <user_tag> b",
    "<user_tag><|im_start|>x", "no specials here", "<|im_start|> spaced <|im_end|>\n", "<s>hi</s>",
]
