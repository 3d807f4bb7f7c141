"""Tokenizer.from_gguf on files that are not what they should be: each refused with a FormatError naming
what is wrong (no crash, no silent garbage), as llama.cpp refuses them; what llama.cpp tolerates, tolerated."""

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from ggrad.ggml.errors import FormatError  # noqa: E402
from ggrad.models import Tokenizer  # noqa: E402

T = gguf.GGUFValueType
BYTES = [f"<0x{b:02X}>" for b in range(256)]
SPM_TOKENS = ["<unk>", "<s>", "</s>"] + BYTES + ["\u2581a", "\u2581", "a", "b"]
SPM_TYPES = [2, 3, 3] + [6] * 256 + [1] * 4
GPT2_TOKENS = ["a", "b", "ab", "\u0120", "\u0120ab"]


def _write(path, entries):
    """A GGUF file with exactly these (key, value, type[, item type]) entries."""
    writer = gguf.GGUFWriter(str(path), arch="llama")
    for key, value, *kind in entries:
        writer.add_key_value(key, value, *kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _spm(**changes):
    """The entries of a small valid "llama" vocabulary, with `changes` (key suffix -> entry or None to drop)."""
    entries = {"model": ("llama", T.STRING), "tokens": (SPM_TOKENS, T.ARRAY, T.STRING),
               "token_type": (SPM_TYPES, T.ARRAY, T.INT32),
               "scores": ([0.0] * len(SPM_TOKENS), T.ARRAY, T.FLOAT32)}
    entries.update(changes)
    return [("tokenizer.ggml." + k, *v) for k, v in entries.items() if v is not None]


def _gpt2(**changes):
    entries = {"model": ("gpt2", T.STRING), "pre": ("qwen2", T.STRING),
               "tokens": (GPT2_TOKENS, T.ARRAY, T.STRING), "merges": (["a b", "\u0120 ab"], T.ARRAY, T.STRING)}
    entries.update(changes)
    return [("tokenizer.ggml." + k, *v) for k, v in entries.items() if v is not None]


def test_small_valid_files(tmp_path):
    spm = Tokenizer.from_gguf(_write(tmp_path / "spm.gguf", _spm()))
    assert spm.encode("a ab") == [1, 259, 259, 262]      # ▁a ▁a b
    assert spm.decode(spm.encode("a ab")) == "<s> a ab"
    bpe = Tokenizer.from_gguf(_write(tmp_path / "bpe.gguf", _gpt2()))
    assert bpe.encode("ab ab") == [2, 4] and bpe.decode([2, 4]) == "ab ab"
    assert len(bpe) == 5 and bpe.bos_token_id is None and bpe.eos_token_id is None   # default 11 is outside


BAD = {
    "not a vocabulary": ([("general.name", "x", T.STRING)], "has no tokenizer.ggml.model"),
    "unknown model": (_spm(model=("bert", T.STRING)), "tokenizer.ggml.model = 'bert'"),
    "model not a string": (_spm(model=(3, T.UINT32)), "tokenizer.ggml.model of type"),
    "unknown pre-tokenizer": (_gpt2(pre=("no-such-pre", T.STRING)), "'no-such-pre'"),
    "no tokens": (_spm(tokens=None), "has no tokens"),
    "tokens not strings": (_spm(tokens=([1, 2, 3], T.ARRAY, T.INT32)), "not an array of strings"),
    "duplicate token": (_spm(tokens=(SPM_TOKENS[:-1] + ["a"], T.ARRAY, T.STRING)), "duplicate token 'a'"),
    "too few scores": (_spm(scores=([0.0] * 5, T.ARRAY, T.FLOAT32)), "5 tokenizer.ggml.scores for 263"),
    "scores of strings": (_spm(scores=(["x"] * len(SPM_TOKENS), T.ARRAY, T.STRING)), "tokenizer.ggml.scores"),
    "too few types": (_spm(token_type=([1] * 9, T.ARRAY, T.INT32)), "9 tokenizer.ggml.token_type"),
    "types of floats": (_spm(token_type=([1.0] * len(SPM_TOKENS), T.ARRAY, T.FLOAT32)), "int32"),
    "no merges": (_gpt2(merges=None), "without tokenizer.ggml.merges"),
    "merge without space": (_gpt2(merges=(["ab"], T.ARRAY, T.STRING)), "merge 0 = 'ab'"),
    "add_bos without bos": (_gpt2(add_bos_token=(True, T.BOOL)), "add_bos_token true but no"),
    "add_bos not bool": (_spm(add_bos_token=(1, T.UINT32)), "not a bool"),
    "bos id not integer": (_spm(bos_token_id=("1", T.STRING)), "not an integer"),
    "bad byte token": (_spm(tokens=(SPM_TOKENS[:3] + ["<0xZZ>"] + SPM_TOKENS[4:], T.ARRAY, T.STRING)),
                       "byte token 3 = '<0xZZ>'"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_damaged_vocabularies_refused(tmp_path, case):
    entries, message = BAD[case]
    path = _write(tmp_path / "bad.gguf", entries)
    with pytest.raises(FormatError, match=message.replace("(", r"\(").replace("[", r"\[")) as info:
        Tokenizer.from_gguf(path)
    assert str(path) in str(info.value)


def test_not_gguf_or_truncated(tmp_path):
    good = _write(tmp_path / "good.gguf", _spm()).read_bytes()
    (tmp_path / "cut.gguf").write_bytes(good[:len(good) // 2])
    (tmp_path / "text.gguf").write_bytes(b"hello, not a model")
    for name in ("cut.gguf", "text.gguf"):
        with pytest.raises(FormatError):
            Tokenizer.from_gguf(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        Tokenizer.from_gguf(tmp_path / "missing.gguf")


def test_tolerated_as_llama_cpp_does(tmp_path):
    """An out-of-range special id warns and keeps the default; an empty token gets a placeholder text."""
    with pytest.warns(UserWarning, match="bos_token_id = 999"):
        tok = Tokenizer.from_gguf(_write(tmp_path / "a.gguf", _spm(bos_token_id=(999, T.UINT32))))
    assert tok.bos_token_id == 1
    tokens = SPM_TOKENS[:-1] + [""]
    tok = Tokenizer.from_gguf(_write(tmp_path / "b.gguf", _spm(tokens=(tokens, T.ARRAY, T.STRING))))
    assert tok.id_to_token(len(tokens) - 1) == f"[EMPTY_{len(tokens) - 1}]"
    assert tok.encode("b", add_bos=False) == [260, 3 + ord("b")]       # ▁, then "b" falls back to its byte
    scores = np.arange(len(SPM_TOKENS), dtype=np.int32).tolist()        # integer scores: llama.cpp reads them
    assert len(Tokenizer.from_gguf(_write(tmp_path / "c.gguf", _spm(scores=(scores, T.ARRAY, T.INT32))))) == 263
