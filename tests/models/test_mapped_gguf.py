"""from_gguf on the CPU reads the file's tensors in place, from its memory map (ggml.mapped): the model's bytes
are the file's, writes to a weight stay in the process, the file can be replaced under the model, and a
repacked weight's pages are given back to the kernel and read again when wanted."""

import sys

import numpy as np
import pytest

import ggrad
import ggrad.models as gm
from ggrad import nn, optim
from ggrad.autograd.raw import from_mapped, page_out, to_raw
from ggrad.autograd.repacked_weights import twin_of
from ggrad.ggml import gguf as gguf_io
from ggrad.ggml.mapped import MappedGGUF


def _model_file(path, dtype="q4_0"):
    ggrad.manual_seed(0)
    config = gm.ModelConfig(architecture="llama", vocab_size=64, hidden_size=64, num_layers=2, num_heads=4,
                            num_kv_heads=2, intermediate_size=128, context_length=32, norm_eps=1e-5, head_dim=16)
    gm.LlamaModel(config).save_gguf(path, type=dtype)
    return path


def _file_bytes(path):
    file = gguf_io.read(path)
    return {info.name: file.read_data(info) for info in file.tensors}


def _logits(model, ids):
    with ggrad.no_grad():
        return model(ggrad.tensor(ids)).numpy()


@pytest.mark.parametrize("repack", [True, False])
def test_weights_are_the_files_bytes_in_place(tmp_path, repack):
    path = _model_file(tmp_path / "m.gguf")
    model = gm.from_gguf(path, repack=repack)
    assert isinstance(model.blk[0].attn_q.weight._block.buffer, MappedGGUF)
    stored = _file_bytes(path)
    state = model.state_dict()
    assert set(state) == set(stored)
    for name, t in state.items():   # a repacked weight's pages were given back: read from the file again
        np.testing.assert_array_equal(to_raw(t), stored[name], err_msg=name)


def test_mmap_false_reads_copies(tmp_path):
    """from_gguf(mmap=False) reads each tensor into memory of its own (llama.cpp's --no-mmap): the same model."""
    path = _model_file(tmp_path / "m.gguf")
    model, copied = gm.from_gguf(path), gm.from_gguf(path, mmap=False)
    assert not isinstance(getattr(copied.blk[0].attn_q.weight._block, "buffer", None), MappedGGUF)
    ids = np.random.default_rng(3).integers(0, 64, (1, 8))
    np.testing.assert_array_equal(_logits(copied, ids), _logits(model, ids))


def test_training_writes_stay_in_the_process(tmp_path):
    """An optimizer step on a loaded float weight (the norms) and on LoRA adapters over the mapped q4_0 base
    changes the model, not the file (the map is copy-on-write)."""
    path = _model_file(tmp_path / "m.gguf")
    before = _file_bytes(path)
    model = gm.from_gguf(path)
    adapters = nn.lora_(model, r=4, alpha=8)
    norm = model.blk[0].attn_norm.weight
    norm.requires_grad_(True)
    opt = optim.AdamW(adapters + [norm], lr=1e-2)
    ids = np.random.default_rng(0).integers(0, 64, (2, 9))
    for _ in range(2):
        logits = model(ggrad.tensor(ids[:, :-1]))
        loss = ggrad.cross_entropy(logits.reshape(-1, 64), ggrad.tensor(ids[:, 1:].reshape(-1)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert not np.array_equal(to_raw(norm), before["blk.0.attn_norm.weight"])
    after = _file_bytes(path)
    assert all(np.array_equal(after[name], before[name]) for name in before)
    base = {n: to_raw(p) for n, p in model.named_parameters() if "lora_" not in n and "attn_norm" not in n}
    assert all(np.array_equal(raw, before[n.replace(".base", "")]) for n, raw in base.items())


def test_the_file_replaced_under_the_model(tmp_path):
    """save_gguf over the file a model was loaded from (written beside it and renamed in: the mapped file
    stays as it was) leaves that model's values alone."""
    path = _model_file(tmp_path / "m.gguf")
    model = gm.from_gguf(path)
    ids = np.random.default_rng(1).integers(0, 64, (1, 8))
    first = _logits(model, ids)
    model.save_gguf(path, type="q8_0")
    np.testing.assert_array_equal(_logits(model, ids), first)
    assert gm.from_gguf(path).blk[0].attn_q.weight.dtype.name == "q8_0"


def _resident_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_page_out_gives_the_pages_back(tmp_path):
    values = np.random.default_rng(0).standard_normal((2048, 1024)).astype(np.float32)   # 8 MiB
    path = tmp_path / "one.gguf"
    gguf_io.write(path, {"general.architecture": "none"}, [("big", "f32", (1024, 2048), values.view(np.uint8))])
    file = gguf_io.read(path)
    t = from_mapped(MappedGGUF(file), file.by_name["big"])
    np.testing.assert_array_equal(t.numpy(), values)   # every page read in
    held = _resident_kib()
    assert page_out(t)
    assert held - _resident_kib() > 4096
    np.testing.assert_array_equal(t.numpy(), values)   # read from the file again
    assert not page_out(t * 2)                         # not a mapped leaf


def test_repacked_weight_pages_given_back(tmp_path):
    """A q4_0 weight from_gguf repacks keeps its repacked copy (the process's own memory, never paged out)
    and computes as the file's layout does."""
    path = _model_file(tmp_path / "m.gguf")
    model = gm.from_gguf(path)
    weight = model.blk[0].ffn_up.weight
    if twin_of(weight) is None:
        pytest.skip("GGML's CPU has no repacked q4_0 layout here")
    assert not page_out(twin_of(weight))               # the repacked copy is the process's own memory
    ids = np.random.default_rng(2).integers(0, 64, (1, 8))
    np.testing.assert_allclose(_logits(model, ids), _logits(gm.from_gguf(path, repack=False), ids), rtol=1e-5,
                               atol=1e-5)
