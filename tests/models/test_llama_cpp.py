"""Against llama.cpp itself, where llama-cpp-python is installed (it is no test dependency: built from its sdist
by hand, see benchmarks/bench_gguf_decode.py): the same logits on the same file, the adapter file applied by
llama.cpp gives the logits of ggrad's LoRA model, and ggrad's merged export runs in llama.cpp."""

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
llama_cpp = pytest.importorskip("llama_cpp")

import ggrad  # noqa: E402
import ggrad.models as gm  # noqa: E402
from ggrad import nn  # noqa: E402

from hf_gguf import tiny_model, write_gguf  # noqa: E402


def _llama_cpp_logits(path, ids, lora=None):
    llm = llama_cpp.Llama(model_path=str(path), lora_path=None if lora is None else str(lora), n_ctx=64,
                          n_threads=2, logits_all=True, verbose=False)
    llm.eval(list(map(int, ids)))
    return np.array(llm.scores[:len(ids)])


def _ours(model, ids):
    with ggrad.no_grad():
        return model(ggrad.tensor(np.asarray(ids)[None])).numpy()[0]


@pytest.mark.parametrize("arch, dtype", [("llama", "f32"), ("qwen2", "f32"), ("llama", "q8_0"), ("qwen2", "q4_0")])
def test_logits_equal_llama_cpp(tmp_path, arch, dtype):
    path = write_gguf(tiny_model(arch=arch), tmp_path / "m.gguf", dtype)
    ids = np.random.default_rng(0).integers(0, 96, 24)
    ref = _llama_cpp_logits(path, ids)
    assert np.abs(_ours(gm.from_gguf(path), ids) - ref).max() < 2e-3 * np.abs(ref).max()


def test_adapter_and_merged_model_run_in_llama_cpp(tmp_path):
    path = write_gguf(tiny_model(), tmp_path / "m.gguf")
    model = gm.from_gguf(path)
    for p in nn.lora_(model, r=4, alpha=8):
        p.data.copy_(ggrad.tensor(np.random.default_rng(p.numel()).normal(0, 0.2, p.shape).astype(np.float32)))
    gm.save_lora_gguf(model, tmp_path / "adapter.gguf")
    model.save_gguf(tmp_path / "merged.gguf")
    ids = np.random.default_rng(0).integers(0, 96, 24)
    ours = _ours(model, ids)
    base = _llama_cpp_logits(path, ids)
    assert np.abs(ours - base).max() > 1e-2 * np.abs(base).max()   # the adapter matters
    for ref in (_llama_cpp_logits(path, ids, lora=tmp_path / "adapter.gguf"),
                _llama_cpp_logits(tmp_path / "merged.gguf", ids)):
        assert np.abs(ours - ref).max() < 2e-3 * np.abs(ref).max()
