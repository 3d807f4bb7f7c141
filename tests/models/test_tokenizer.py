"""ggrad.models.Tokenizer against `tokenizers` on the same vocabularies (made here, written to GGUF files):
ids over many strings, special tokens parsed or not, BOS/EOS by metadata, decoding and its clean-up."""

import random
import unicodedata

import numpy as np
import pytest

from tokenizer_vocabs import (DEFAULT_PATTERNS, HF_PATTERNS, SPECIAL_STRINGS, STRINGS, Regex,  # skips without
                              byte_level, pre_tokenizers, sentencepiece, write_gguf)           # tokenizers/gguf

import ggrad
from ggrad.models import Tokenizer
from ggrad.models.tokenizer import _clean_spaces
from ggrad.models.tokenizer_pretokenize import PreTokenizer

PRE_NAMES = {"gpt2": "gpt-2", "llama3": "llama-bpe", "qwen2": "qwen2", "default": None}


@pytest.fixture(scope="module")
def byte_level_vocabs():
    return {pre: byte_level(pre) for pre in PRE_NAMES}


@pytest.fixture(scope="module")
def spm_vocab():
    return sentencepiece()


def _random_texts(seed, count=40):
    """Strings of random pieces of the test strings and odd characters, glued with random whitespace."""
    rng = random.Random(seed)
    pool = STRINGS + ["'s", "'LL", "1", "22", "333", "4444", "é", "\u0301", "🙂", "\x00", "\x1f", "\ufeff", "\U0010fffd"]
    glue = ["", " ", "  ", "\n", "\r\n", "\t", " \n ", "\u3000"]
    return ["".join(rng.choice(pool) + rng.choice(glue) for _ in range(rng.randint(1, 12))) for _ in range(count)]


def _byte_level_tokenizer(tmp_path, vocab, pre):
    """The GGUF file's tokenizer; a file without tokenizer.ggml.pre ("default") warns that it names none."""
    if PRE_NAMES[pre] is not None:
        return Tokenizer.from_gguf(vocab.write(tmp_path / "v.gguf", "gpt2", pre=PRE_NAMES[pre]))
    with pytest.warns(UserWarning, match="names no pre-tokenizer"):
        return Tokenizer.from_gguf(vocab.write(tmp_path / "v.gguf", "gpt2"))


@pytest.mark.parametrize("pre", list(PRE_NAMES))
def test_pre_tokenizer_equals_tokenizers_split(pre):
    """Word boundaries on random text of every script, controls and spaces (characters assigned in this
    Python's Unicode tables: one added to Unicode later is unassigned there, a letter in newer tables)."""
    patterns = DEFAULT_PATTERNS if pre == "default" else [HF_PATTERNS[pre]]
    reference = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(p), "isolated") for p in patterns])
    mine = PreTokenizer(PRE_NAMES[pre] or "default")
    rng = random.Random(2)

    def character():
        r = rng.random()
        if r < 0.5:
            return rng.choice([chr(rng.randint(0, 127)), *" \n\r\t\x0b\x85\xa0\u2028\u3000\u200b'sStT"])
        while True:
            c = chr(rng.randint(0x80, 0xFFFF) if r < 0.9 else rng.randint(0x10000, 0x10FFFF))
            if unicodedata.category(c) not in ("Cn", "Cs"):
                return c
    for _ in range(3000):
        text = "".join(character() for _ in range(rng.randint(1, 30)))
        assert mine.split(text) == [w for w, _ in reference.pre_tokenize_str(text)], repr(text)


def _check_ids(tok, vocab, texts, parse_special):
    for text in texts:
        assert tok.encode(text, add_bos=False, parse_special=parse_special) == \
            vocab.reference_ids(text, parse_special), repr(text)


@pytest.mark.parametrize("pre", list(PRE_NAMES))
@pytest.mark.parametrize("parse_special", [False, True])
def test_byte_level_ids_equal_tokenizers(tmp_path, byte_level_vocabs, pre, parse_special):
    vocab = byte_level_vocabs[pre]
    tok = _byte_level_tokenizer(tmp_path, vocab, pre)
    assert len(tok) == len(vocab.tokens) and tok.model == "gpt2"
    _check_ids(tok, vocab, STRINGS + SPECIAL_STRINGS + _random_texts(len(pre)), parse_special)


@pytest.mark.parametrize("parse_special", [False, True])
def test_sentencepiece_ids_equal_tokenizers(tmp_path, spm_vocab, parse_special):
    tok = Tokenizer.from_gguf(spm_vocab.write(tmp_path / "v.gguf", "llama"))
    assert len(tok) == len(spm_vocab.tokens) and tok.model == "llama"
    _check_ids(tok, spm_vocab, STRINGS + SPECIAL_STRINGS + _random_texts(7), parse_special)
    # characters outside the vocabulary fall back to their UTF-8 bytes
    ids = tok.encode("日🙂", add_bos=False)
    assert [tok.id_to_token(i) for i in ids[-4:]] == ["<0xF0>", "<0x9F>", "<0x99>", "<0x82>"]


def test_sentencepiece_token_across_words(tmp_path, spm_vocab):
    """A token holding "▁" after another character ("e▁") lets merges cross word starts: no per-word cut."""
    vocab = spm_vocab.extended("e\u2581", score=5.0, ref_merges=[("e", "\u2581")])
    tok = Tokenizer.from_gguf(vocab.write(tmp_path / "v.gguf", "llama"))
    _check_ids(tok, vocab, ["the end", "one more time here", "e e e", "three  spaces"] + STRINGS, False)
    assert tok.token_to_id("e\u2581") in tok.encode("the end")


@pytest.mark.parametrize("pre", ["llama3", "gpt2"])
def test_ignore_merges(tmp_path, byte_level_vocabs, pre):
    """llama3 keeps a word that is a token whole even where no merges lead to it; gpt2 merges it."""
    vocab = byte_level_vocabs[pre].extended("\u0120xyzzy")
    tok = Tokenizer.from_gguf(vocab.write(tmp_path / "v.gguf", "gpt2", pre=PRE_NAMES[pre]))
    _check_ids(tok, vocab, ["a xyzzy b", " xyzzy", "xyzzy", " xyzzyx"], False)
    assert (tok.token_to_id("\u0120xyzzy") in tok.encode("a xyzzy")) == (pre == "llama3")


def test_add_bos_follows_metadata(tmp_path, spm_vocab, byte_level_vocabs):
    spm = Tokenizer.from_gguf(spm_vocab.write(tmp_path / "spm.gguf", "llama"))
    assert spm.bos_token_id == 1 and spm.eos_token_id == 2 and spm.add_bos_token and not spm.add_eos_token
    assert spm.encode("hi") == [1] + spm.encode("hi", add_bos=False)
    assert spm.encode("") == [1] and spm.encode("", add_bos=False) == []
    off = Tokenizer.from_gguf(spm_vocab.write(tmp_path / "spm_off.gguf", "llama", add_bos_token=False))
    assert off.encode("hi") == spm.encode("hi", add_bos=False)
    both = Tokenizer.from_gguf(spm_vocab.write(tmp_path / "spm_eos.gguf", "llama", add_eos_token=True))
    assert both.encode("hi") == [1] + spm.encode("hi", add_bos=False) + [2]

    vocab = byte_level_vocabs["llama3"]
    bos, eos = len(vocab.tokens) - 4, len(vocab.tokens) - 4      # <|endoftext|>
    llama3 = Tokenizer.from_gguf(vocab.write(tmp_path / "l3.gguf", "gpt2", pre="llama-bpe", bos_token_id=bos,
                                             eos_token_id=eos))
    assert llama3.add_bos_token and llama3.encode("hi") == [bos] + llama3.encode("hi", add_bos=False)
    vocab = byte_level_vocabs["qwen2"]
    qwen2 = Tokenizer.from_gguf(vocab.write(tmp_path / "q.gguf", "gpt2", pre="qwen2", bos_token_id=bos,
                                            eos_token_id=eos))
    assert not qwen2.add_bos_token and qwen2.encode("hi") == qwen2.encode("hi", add_bos=False)
    forced = Tokenizer.from_gguf(vocab.write(tmp_path / "q_bos.gguf", "gpt2", pre="qwen2", bos_token_id=bos,
                                             add_bos_token=True))
    assert forced.encode("hi")[0] == bos


def test_special_tokens_and_end_of_generation(tmp_path, byte_level_vocabs):
    vocab = byte_level_vocabs["qwen2"]
    tok = Tokenizer.from_gguf(vocab.write(tmp_path / "q.gguf", "gpt2", pre="qwen2"))
    end, start, im_end, user = (tok.token_to_id(t) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>",
                                                             "<user_tag>"))
    assert tok.encode("<|im_start|>hi", parse_special=True)[0] == start
    assert start not in tok.encode("<|im_start|>hi")                 # control tokens: only when asked
    assert user in tok.encode("a<user_tag>b")                         # user-defined: always
    assert tok.eog_token_ids >= {end, im_end} and tok.eot_token_id == im_end
    # a file that types every token normal: llama.cpp still makes end-of-generation texts control tokens
    plain = Tokenizer.from_gguf(write_gguf(tmp_path / "untyped.gguf", "gpt2", vocab.tokens, merges=vocab.merges,
                                           pre="qwen2"))
    assert plain.encode("<|endoftext|>", parse_special=True) == [end]
    assert plain.encode("<|im_start|>", parse_special=True) != [start]
    assert plain.decode([end], skip_special_tokens=True) == ""


@pytest.mark.parametrize("pre", ["qwen2", "gpt2", "llama3", "default"])
def test_byte_level_decode(tmp_path, byte_level_vocabs, pre):
    vocab = byte_level_vocabs[pre]
    tok = _byte_level_tokenizer(tmp_path, vocab, pre)
    for text in STRINGS + SPECIAL_STRINGS + _random_texts(3):
        ids = tok.encode(text, parse_special=True)
        expected = vocab.reference.decode(ids, skip_special_tokens=False)
        if pre != "qwen2":                                 # llama.cpp cleans up spaces for these
            expected = _llama_cpp_clean_up(expected)
        assert tok.decode(ids) == expected, repr(text)
        if pre == "qwen2":
            assert tok.decode(ids) == text
        assert tok.decode(ids, skip_special_tokens=True) == \
            tok.decode([i for i in ids if tok.id_to_token(i) not in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")])


def _llama_cpp_clean_up(text):
    """llama.cpp's clean-up as llama_detokenize writes it: three in-place passes over the bytes."""
    t = bytearray(text.encode())
    n = len(t)
    total = min(n, 1)
    for i in range(1, n):                   # " ?", " !", " .", " ,"
        x = t[i]
        if t[i - 1] == 0x20 and x in b"?!.,":
            total -= 1
        t[total] = x
        total += 1
    n, total, i = total, min(total, 1), 1
    while i < n:                            # " ' "
        x = t[i]
        if x == 0x27 and i + 1 < n and t[i - 1] == 0x20 and t[i + 1] == 0x20:
            total -= 1
            i += 1
            t[i] = 0
        t[total] = x
        total += 1
        i += 1
    n, total = total, min(total, 1)
    for i in range(1, n):                   # " 's", " 'm", " 're", " 've"
        x = t[i]
        if t[i - 1] == 0x20 and x == 0x27 and i + 1 < n:
            if t[i + 1] in b"sm":
                total -= 1
            elif t[i + 1] not in b"td" and i + 2 < n and t[i + 1:i + 3] in (b"re", b"ve"):
                total -= 1
        t[total] = x
        total += 1
    return t[:total].decode()


def test_clean_up_equals_llama_cpp_loops():
    rng = random.Random(0)
    alphabet = " 'smtdrevl.,?!x"
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert _clean_spaces(text.encode()).decode() == _llama_cpp_clean_up(text), repr(text)


def test_clean_up_rules(tmp_path, byte_level_vocabs):
    tok = Tokenizer.from_gguf(byte_level_vocabs["llama3"].write(tmp_path / "l3.gguf", "gpt2", pre="llama-bpe"))
    cases = {"Hello , world . Right ?": "Hello, world. Right?", "It 's a ' b": "It's a'b", "I 'm , you 're": "I'm, you're",
             "don 't , we 'll , he 'd": "don 't, we 'll, he 'd", "no change": "no change", " .": ".", "'": "'"}
    for text, expected in cases.items():
        assert tok.decode(tok.encode(text, add_bos=False)) == expected, text
    qwen = Tokenizer.from_gguf(byte_level_vocabs["qwen2"].write(tmp_path / "q.gguf", "gpt2", pre="qwen2"))
    for text in cases:
        assert qwen.decode(qwen.encode(text)) == text


def test_sentencepiece_decode(tmp_path, spm_vocab):
    tok = Tokenizer.from_gguf(spm_vocab.write(tmp_path / "v.gguf", "llama"))
    for text in STRINGS + _random_texts(11):
        ids = tok.encode(text)                              # with BOS
        assert tok.decode(ids, skip_special_tokens=True) == text == \
            spm_vocab.reference.decode(ids, skip_special_tokens=True), repr(text)
        assert tok.decode(ids[1:]) == text                 # the leading "▁" is removed without BOS too
        assert tok.decode(ids) == spm_vocab.reference.decode(ids, skip_special_tokens=False)
    assert tok.decode([1, tok.token_to_id("\u2581the")]) == "<s> the"
    emoji = tok.encode("🙂", add_bos=False)
    assert tok.decode(emoji[:-1]) == "\ufffd"            # a character cut short
    no_prefix = Tokenizer.from_gguf(spm_vocab.write(tmp_path / "np.gguf", "llama", add_space_prefix=False))
    ids = no_prefix.encode("two words", add_bos=False)
    assert no_prefix.id_to_token(ids[0])[0] != "\u2581" and no_prefix.decode(ids) == "two words"


def test_arguments(tmp_path, spm_vocab):
    tok = Tokenizer.from_gguf(spm_vocab.write(tmp_path / "v.gguf", "llama"))
    with pytest.raises(TypeError):
        tok.encode(b"bytes")
    with pytest.raises(TypeError):
        tok.decode("text")
    with pytest.raises(IndexError, match="outside the vocabulary"):
        tok.decode([len(tok)])
    with pytest.raises(IndexError):
        tok.decode([-1])
    ids = tok.encode("tensor of ids")
    assert tok.decode(ggrad.tensor(np.array(ids))) == tok.decode(np.array(ids)) == tok.decode(ids)
    with pytest.raises(TypeError, match="one sequence"):
        tok.decode(np.array([ids, ids]))
    assert f"vocab_size={len(spm_vocab.tokens)}" in repr(tok)
