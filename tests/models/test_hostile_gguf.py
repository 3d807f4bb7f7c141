"""from_gguf refuses damaged, truncated, foreign and inconsistent files with a FormatError naming what is wrong.

The loads run in a child interpreter: whatever a file does, the test process survives, and the child must end
normally having printed one refusal per file."""

import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

from ggrad.ggml import gguf as ggml_gguf  # noqa: E402

from hf_gguf import tiny_model, write_gguf  # noqa: E402


def _rewrite(src, dst, metadata=None, drop=(), reshape=None, extra=None):
    """A copy of GGUF `src` with metadata replaced, tensors dropped, one tensor's ne changed, one added."""
    file = ggml_gguf.read(src)
    meta = dict(file.metadata)
    meta.pop("general.alignment", None)
    for key, value in (metadata or {}).items():
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    tensors = []
    for info in file.tensors:
        if info.name in drop:
            continue
        raw, ne = file.read_data(info), [n for n in info.ne[:len(info.shape)]]
        if reshape and info.name == reshape:
            ne = [ne[0] // 2, ne[1] * 2] if len(ne) == 2 else ne
        tensors.append((info.name, info.dtype, ne, raw))
    if extra:
        tensors.append((extra, "f32", [4], np.zeros(4, np.float32).view(np.uint8)))
    ggml_gguf.write(dst, meta, tensors)
    return str(dst)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """{file: words its error must contain}."""
    d = tmp_path_factory.mktemp("hostile")
    good = str(write_gguf(tiny_model(), d / "good.gguf", "q8_0"))
    data = open(good, "rb").read()
    cases = {}
    (d / "text.gguf").write_bytes(b"hello, this is not a model\n" * 10)
    cases[str(d / "text.gguf")] = ["not a GGUF file"]
    for cut in (10, 200, len(data) // 2, len(data) - 100):
        path = d / f"cut{cut}.gguf"
        path.write_bytes(data[:cut])
        cases[str(path)] = ["truncated"] if cut > 24 else ["truncated", "header"]
    bad_version = bytearray(data)
    bad_version[4:8] = (99).to_bytes(4, "little")
    (d / "version.gguf").write_bytes(bytes(bad_version))
    cases[str(d / "version.gguf")] = ["version 99"]
    cases[_rewrite(good, d / "arch.gguf", {"general.architecture": "gpt2"})] = ["'gpt2'", "llama, qwen2"]
    cases[_rewrite(good, d / "noarch.gguf", {"general.architecture": None})] = ["general.architecture"]
    cases[_rewrite(good, d / "nokey.gguf", {"llama.block_count": None})] = ["llama.block_count"]
    cases[_rewrite(good, d / "notensor.gguf", drop=("blk.1.ffn_down.weight",))] = ["blk.1.ffn_down.weight"]
    cases[_rewrite(good, d / "shape.gguf", reshape="blk.0.attn_v.weight")] = ["blk.0.attn_v.weight", "shape"]
    cases[_rewrite(good, d / "extra.gguf", extra="blk.7.attn_q.weight")] = ["blk.7.attn_q.weight"]
    cases[_rewrite(good, d / "layers.gguf", {"llama.block_count": np.uint32(3)})] = ["blk.2."]
    cases[_rewrite(good, d / "vocab.gguf", {"llama.vocab_size": np.uint32(1000)})] = ["vocab_size", "1000"]
    cases[_rewrite(good, d / "heads.gguf", {"llama.attention.head_count_kv": np.uint32(3)})] = ["heads"]
    cases[_rewrite(good, d / "nokv.gguf", {"llama.attention.head_count_kv": np.uint32(0)})] = ["head_count_kv=0"]
    return good, cases


CHILD = """
import json, sys
import ggrad.models as gm
from ggrad.ggml.errors import FormatError
out = {}
for path in json.loads(sys.argv[1]):
    try:
        gm.from_gguf(path)
        out[path] = "loaded"
    except FormatError as e:
        out[path] = "FormatError: " + str(e)
    except Exception as e:
        out[path] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


def test_hostile_files_are_refused_with_clear_errors(hostile):
    good, cases = hostile
    run = subprocess.run([sys.executable, "-c", CHILD, json.dumps([good] + list(cases))], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result[good] == "loaded"
    for path, words in cases.items():
        message = result[path]
        assert message.startswith("FormatError: "), (path, message)
        for word in words:
            assert word in message, (path, word, message)
