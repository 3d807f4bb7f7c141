"""The GGUF fine-tuning example runs as shipped (short settings, in a subprocess): with no model it builds one,
writes it to GGUF, fine-tunes it, and writes llama.cpp's adapter; a given model file is fine-tuned as well."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ggrad import models
from ggrad.examples.finetune_gguf import file_tokenizer
from ggrad.ggml import gguf

ROOT = Path(__file__).resolve().parents[2]
SHORT = ["--pretrain-steps", "30", "--steps", "40", "--hidden", "64", "--layers", "1", "--heads", "2",
         "--context", "32", "--batch", "8", "--lr", "1e-2", "--sample", "16"]


def _run(args, tmp_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "ggrad.examples.finetune_gguf", *args], capture_output=True,
                         text=True, timeout=300, env=env, cwd=tmp_path)
    assert out.returncode == 0, f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def test_builds_a_model_and_fine_tunes_it(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 60)
    stdout = _run([*SHORT, "--out", str(tmp_path / "run")], tmp_path)   # fine-tunes on the stdlib's LICENSE
    before, after = map(float, re.search(r"validation loss: before ([\d.]+), after ([\d.]+)", stdout).groups())
    assert np.isfinite(before) and np.isfinite(after)
    assert "--- sample before ---" in stdout and "--- sample after ---" in stdout
    base = gguf.read(tmp_path / "run" / "base.gguf")
    assert base.metadata["general.architecture"] == "llama" and base.by_name["blk.0.attn_q.weight"].dtype.name == "q8_0"
    adapter = gguf.read(tmp_path / "run" / "adapter.gguf")
    assert adapter.metadata["general.type"] == "adapter" and adapter.metadata["adapter.type"] == "lora"
    assert "blk.0.ffn_down.weight.lora_b" in adapter.by_name
    # the file just written, fine-tuned on a repetitive text: the adapter learns it
    stdout = _run([str(tmp_path / "run" / "base.gguf"), str(text), *SHORT, "--out", str(tmp_path / "again"),
                   "--checkpoint", "--merged", "q8_0"], tmp_path)
    before, after = map(float, re.search(r"validation loss: before ([\d.]+), after ([\d.]+)", stdout).groups())
    assert after < before - 0.2, stdout
    assert (tmp_path / "again" / "adapter.gguf").exists() and (tmp_path / "again" / "merged-q8_0.gguf").exists()


def test_a_file_s_own_vocabulary_tokenizes_its_text(tmp_path):
    """A model file with a vocabulary other than the example's bytes is tokenized by ggrad.models.Tokenizer."""
    pytest.importorskip("tokenizers")
    sys.path.insert(0, str(ROOT / "tests" / "models"))
    try:
        from tokenizer_vocabs import sentencepiece
    finally:
        sys.path.pop(0)
    path = sentencepiece().write(tmp_path / "v.gguf", "llama")
    tok = file_tokenizer(path, gguf.read(path).metadata)
    assert isinstance(tok, models.Tokenizer)
    text = "the quick brown fox"
    assert tok.decode(tok.encode(text)[1:]) == text
    assert tok.encode(text) == models.Tokenizer.from_gguf(path).encode(text)
