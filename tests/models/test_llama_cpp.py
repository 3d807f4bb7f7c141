"""Against llama.cpp itself, where llama-cpp-python is installed (no test dependency: built from its sdist by hand,
see benchmarks/README.md): the same logits on the same file, the adapter file applied by llama.cpp gives the
logits of ggrad's LoRA model, and ggrad's merged export runs in llama.cpp. llama.cpp runs in a child process
(its GGML is another build than ggrad's), with a float32 KV cache and no flash attention (its defaults round
keys and values to f16)."""

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
if importlib.util.find_spec("llama_cpp") is None:
    pytest.skip("llama-cpp-python is not installed", allow_module_level=True)

import ggrad  # noqa: E402
import ggrad.models as gm  # noqa: E402
from ggrad import nn  # noqa: E402

from hf_gguf import tiny_model, write_gguf  # noqa: E402

CHILD = """
import json, sys
import numpy as np
import llama_cpp
model, lora, ids, out = json.loads(sys.argv[1])
llm = llama_cpp.Llama(model_path=model, lora_path=lora, n_ctx=64, n_batch=64, n_threads=2, logits_all=True,
                      verbose=False, type_k=0, type_v=0, flash_attn=False)
llm.eval(ids)
np.save(out, np.array(llm.scores[:len(ids)], dtype=np.float32))
"""


def _llama_cpp_logits(path, ids, tmp_path, lora=None):
    out = tmp_path / "llama_cpp_logits.npy"
    args = json.dumps([str(path), None if lora is None else str(lora), [int(i) for i in ids], str(out)])
    run = subprocess.run([sys.executable, "-c", CHILD, args], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return np.load(out)


def _ours(model, ids):
    with ggrad.no_grad():
        return model(ggrad.tensor(np.asarray(ids)[None])).numpy()[0]


def _relative(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("arch, dtype", [("llama", "f32"), ("qwen2", "f32"), ("llama", "q8_0"), ("qwen2", "q4_0"),
                                         ("llama", "q4_K")])
def test_logits_equal_llama_cpp(tmp_path, arch, dtype):
    sizes = {"hidden": 256, "intermediate": 512} if dtype.endswith("K") else {}   # K-quant rows of 256
    path = write_gguf(tiny_model(arch=arch, **sizes), tmp_path / "m.gguf", dtype)
    ids = np.random.default_rng(0).integers(0, 96, 24)
    assert _relative(_ours(gm.from_gguf(path), ids), _llama_cpp_logits(path, ids, tmp_path)) < 1e-4


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_yarn_logits_equal_llama_cpp(tmp_path, arch):
    """YaRN with its default betas (llama.cpp reads no yarn_beta_* keys for these architectures)."""
    hf = tiny_model(arch=arch, yarn={"factor": 4.0, "original_max_position_embeddings": 32})
    path = write_gguf(hf, tmp_path / "m.gguf")
    ids = np.random.default_rng(0).integers(0, 96, 24)
    assert _relative(_ours(gm.from_gguf(path), ids), _llama_cpp_logits(path, ids, tmp_path)) < 1e-4


def test_adapter_and_merged_model_run_in_llama_cpp(tmp_path):
    path = write_gguf(tiny_model(), tmp_path / "m.gguf")
    model = gm.from_gguf(path)
    for p in nn.lora_(model, r=4, alpha=8):
        p.data.copy_(ggrad.tensor(np.random.default_rng(p.numel()).normal(0, 0.2, p.shape).astype(np.float32)))
    gm.save_lora_gguf(model, tmp_path / "adapter.gguf")
    model.save_gguf(tmp_path / "merged.gguf")
    ids = np.random.default_rng(0).integers(0, 96, 24)
    ours = _ours(model, ids)
    assert _relative(ours, _llama_cpp_logits(path, ids, tmp_path)) > 1e-2   # the adapter matters
    assert _relative(ours, _llama_cpp_logits(path, ids, tmp_path, lora=tmp_path / "adapter.gguf")) < 1e-4
    assert _relative(ours, _llama_cpp_logits(tmp_path / "merged.gguf", ids, tmp_path)) < 1e-4
    fresh = gm.from_gguf(path)   # the adapter read back gives llama.cpp's --lora logits too
    gm.load_lora_gguf(fresh, tmp_path / "adapter.gguf")
    assert _relative(_ours(fresh, ids), _llama_cpp_logits(path, ids, tmp_path, lora=tmp_path / "adapter.gguf")) < 1e-4
