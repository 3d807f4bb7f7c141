"""LoRA and QLoRA on GGUF models: forward and gradients against peft on the same weights, training on a
quantized base (checkpointed, under autocast), the llama.cpp adapter file and the merged model written back."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
peft = pytest.importorskip("peft")
gguf = pytest.importorskip("gguf")

import ggrad  # noqa: E402
import ggrad.models as gm  # noqa: E402
from ggrad import nn, optim  # noqa: E402
from ggrad.autograd.raw import to_raw  # noqa: E402
from ggrad.ggml import gguf as gguf_io  # noqa: E402

from hf_gguf import permute, tiny_model, write_gguf  # noqa: E402

HF_OF = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
         "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
         "ffn_down": "mlp.down_proj"}
TARGETS = ("attn_q", "attn_k", "attn_v", "ffn_down")


def _targets(names):
    return lambda name, module: name.rsplit(".", 1)[-1] in names


def _rows(name, config, b):
    """lora_B's rows in llama.cpp's layout: q and k permuted as their weights are."""
    if name == "attn_q":
        return permute(b, config.num_attention_heads, config.num_attention_heads)
    if name == "attn_k":
        return permute(b, config.num_attention_heads, config.num_key_value_heads)
    return b


def _pair(tmp_path, r=4, alpha=8.0, dtype="f32"):
    """(peft model, ggrad model) with the same base and the same random adapters (B nonzero)."""
    hf = tiny_model()
    path = write_gguf(hf, tmp_path / "m.gguf", dtype)
    config = peft.LoraConfig(r=r, lora_alpha=alpha, lora_dropout=0.0,
                             target_modules=[HF_OF[t].split(".")[-1] for t in TARGETS])
    peft_model = peft.get_peft_model(hf, config)
    model = gm.from_gguf(path)
    nn.lora_(model, r=r, alpha=alpha, modules=_targets(TARGETS))
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for i in range(hf.config.num_hidden_layers):
            for ours in TARGETS:
                layer = peft_model.base_model.model.model.layers[i].get_submodule(HF_OF[ours])
                a, b = layer.lora_A["default"].weight, layer.lora_B["default"].weight
                a.copy_(torch.randn(a.shape, generator=gen) * 0.2)
                b.copy_(torch.randn(b.shape, generator=gen) * 0.2)
                mine = model.get_submodule(f"blk.{i}.{ours}")
                mine.lora_A.copy_(ggrad.tensor(a.numpy()))
                mine.lora_B.copy_(ggrad.tensor(_rows(ours, hf.config, b.numpy())))
    return peft_model, model


def test_lora_forward_and_gradients_equal_peft(tmp_path):
    peft_model, model = _pair(tmp_path)
    ids = np.random.default_rng(0).integers(0, 96, (2, 16))
    targets = np.random.default_rng(1).integers(0, 96, (2 * 16,))
    out = peft_model(torch.tensor(ids)).logits
    loss = torch.nn.functional.cross_entropy(out.reshape(-1, 96), torch.tensor(targets))
    loss.backward()
    logits = model(ggrad.tensor(ids))
    mine = ggrad.cross_entropy(logits.reshape(-1, 96), ggrad.tensor(targets))
    mine.backward()
    ref = out.detach().numpy()
    assert np.abs(logits.detach().numpy() - ref).max() < 1e-4 * np.abs(ref).max()
    assert abs(mine.item() - loss.item()) < 1e-5
    config = peft_model.base_model.model.config
    for i in range(config.num_hidden_layers):
        for ours in TARGETS:
            layer = peft_model.base_model.model.model.layers[i].get_submodule(HF_OF[ours])
            ga = layer.lora_A["default"].weight.grad.numpy()
            gb = _rows(ours, config, layer.lora_B["default"].weight.grad.numpy())
            adapter = model.get_submodule(f"blk.{i}.{ours}")
            np.testing.assert_allclose(adapter.lora_A.grad.numpy(), ga, rtol=1e-3, atol=1e-5 * np.abs(ga).max())
            np.testing.assert_allclose(adapter.lora_B.grad.numpy(), gb, rtol=1e-3, atol=1e-5 * np.abs(gb).max())


def _train(model, adapters, steps, checkpointing=False, autocast=False):
    model.gradient_checkpointing = checkpointing
    opt = optim.AdamW(adapters, lr=1e-2, weight_decay=0.0)
    rng = np.random.default_rng(0)
    data = np.tile(np.arange(32) % 7, 8)   # a repeating pattern to learn
    losses = []
    for _ in range(steps):
        starts = rng.integers(0, len(data) - 17, 4)
        window = np.stack([data[s:s + 17] for s in starts])
        with ggrad.autocast("cpu", dtype=ggrad.bfloat16, enabled=autocast):
            logits = model(ggrad.tensor(window[:, :-1]))
            loss = ggrad.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                       ggrad.tensor(window[:, 1:].reshape(-1)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("autocast", [False, True])
def test_qlora_trains_on_a_q4_0_base(tmp_path, autocast):
    model = gm.from_gguf(write_gguf(tiny_model(), tmp_path / "m.gguf", "q4_0"))
    adapters = nn.lora_(model, r=8, alpha=16)
    base = {n: to_raw(p).tobytes() for n, p in model.named_parameters() if "lora_" not in n}
    losses = _train(model, adapters, 30, checkpointing=True, autocast=autocast)
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])
    assert all(to_raw(p).tobytes() == base[n] for n, p in model.named_parameters() if "lora_" not in n)


def test_checkpointing_gives_the_same_gradients(tmp_path):
    path = write_gguf(tiny_model(), tmp_path / "m.gguf", "q8_0")
    grads = []
    for checkpointing in (False, True):
        ggrad.manual_seed(0)
        model = gm.from_gguf(path)
        adapters = nn.lora_(model, r=4, alpha=8)
        for a in adapters:
            a.data.copy_(ggrad.tensor(np.random.default_rng(a.numel()).normal(0, 0.1, a.shape).astype(np.float32)))
        model.gradient_checkpointing = checkpointing
        ids = np.random.default_rng(0).integers(0, 96, (2, 12))
        loss = model(ggrad.tensor(ids)).square().mean()
        loss.backward()
        grads.append([a.grad.numpy() for a in adapters])
    for g0, g1 in zip(*grads):
        np.testing.assert_allclose(g1, g0, rtol=1e-5, atol=1e-7)


def test_save_lora_gguf_is_llama_cpp_adapter(tmp_path):
    _, model = _pair(tmp_path, r=4, alpha=8.0)
    gm.save_lora_gguf(model, tmp_path / "adapter.gguf")
    reader = gguf.GGUFReader(str(tmp_path / "adapter.gguf"))
    fields = reader.fields

    def value(key):
        field = fields[key]
        data = field.parts[field.data[0]]
        return bytes(data).decode() if field.types[0] == gguf.GGUFValueType.STRING else data[0]

    assert value("general.type") == "adapter" and value("adapter.type") == "lora"
    assert value("general.architecture") == "llama"
    assert fields["adapter.lora.alpha"].types[0] == gguf.GGUFValueType.FLOAT32 and value("adapter.lora.alpha") == 8.0
    tensors = {t.name: t for t in reader.tensors}
    assert len(tensors) == 2 * 2 * len(TARGETS)
    for i in range(2):
        for ours in TARGETS:
            base = model.get_submodule(f"blk.{i}.{ours}").base.weight   # (out, in): ne [in, out]
            a, b = tensors[f"blk.{i}.{ours}.weight.lora_a"], tensors[f"blk.{i}.{ours}.weight.lora_b"]
            # llama.cpp's checks: model ne[0] == a ne[0], model ne[1] == b ne[1], a ne[1] == b ne[0] (the rank)
            assert list(a.shape) == [base.shape[1], 4] and list(b.shape) == [4, base.shape[0]]
            assert a.tensor_type == gguf.GGMLQuantizationType.F32
            adapter = model.get_submodule(f"blk.{i}.{ours}")
            np.testing.assert_array_equal(np.asarray(a.data).reshape(4, -1), adapter.lora_A.detach().numpy())
            np.testing.assert_array_equal(np.asarray(b.data).reshape(-1, 4), adapter.lora_B.detach().numpy())


def test_save_lora_gguf_without_adapters_raises(tmp_path):
    model = gm.from_gguf(write_gguf(tiny_model(), tmp_path / "m.gguf"))
    with pytest.raises(ValueError, match="no LoRA adapters"):
        gm.save_lora_gguf(model, tmp_path / "a.gguf")


def test_save_gguf_round_trip_with_merged_adapters(tmp_path):
    _, model = _pair(tmp_path)
    ids = np.random.default_rng(0).integers(0, 96, (2, 16))
    with ggrad.no_grad():
        tuned = model(ggrad.tensor(ids)).numpy()
    model.save_gguf(tmp_path / "merged.gguf")
    merged = gm.from_gguf(tmp_path / "merged.gguf")
    with ggrad.no_grad():
        again = merged(ggrad.tensor(ids)).numpy()
    assert np.abs(again - tuned).max() < 1e-5 * np.abs(tuned).max()
    original = gguf.GGUFReader(str(tmp_path / "m.gguf"))
    written = gguf.GGUFReader(str(tmp_path / "merged.gguf"))
    assert set(original.fields) - {"general.alignment"} <= set(written.fields)   # metadata kept (tokenizer too)
    assert sorted(t.name for t in written.tensors) == sorted(t.name for t in original.tensors)


@pytest.mark.parametrize("dtype", ["q8_0", "q4_0", "f16"])
def test_save_gguf_in_another_type(tmp_path, dtype):
    """An f32 model written as `dtype` is the file llama.cpp's converter makes in that type (gguf-py's
    quantizer): the same tensors, byte for byte, the same logits once loaded, general.file_type set."""
    hf = tiny_model(arch="qwen2")
    model = gm.from_gguf(write_gguf(hf, tmp_path / "m.gguf"))
    model.save_gguf(tmp_path / "out.gguf", type=dtype)
    converted = write_gguf(hf, tmp_path / "converted.gguf", dtype)
    reader = gguf.GGUFReader(str(tmp_path / "out.gguf"))
    expected = {t.name: t for t in gguf.GGUFReader(str(converted)).tensors}
    for t in reader.tensors:
        assert t.tensor_type == expected[t.name].tensor_type, t.name
        assert np.asarray(t.data).tobytes() == np.asarray(expected[t.name].data).tobytes(), t.name
    assert reader.fields["general.file_type"].parts[-1][0] == {"q8_0": 7, "q4_0": 2, "f16": 1}[dtype]
    ids = np.random.default_rng(0).integers(0, 96, (1, 16))
    with ggrad.no_grad():
        out = gm.from_gguf(tmp_path / "out.gguf")(ggrad.tensor(ids)).numpy()
        ref = gm.from_gguf(converted)(ggrad.tensor(ids)).numpy()
    np.testing.assert_array_equal(out, ref)


def test_load_lora_gguf_gives_the_adapted_logits(tmp_path):
    """An adapter written by save_lora_gguf, loaded onto a fresh model, gives the adapted model's logits (and
    peft's); its layers, ranks and alpha are the file's."""
    peft_model, model = _pair(tmp_path, r=4, alpha=8.0)
    gm.save_lora_gguf(model, tmp_path / "adapter.gguf")
    fresh = gm.from_gguf(tmp_path / "m.gguf")
    fresh.requires_grad_(False)
    params = gm.load_lora_gguf(fresh, tmp_path / "adapter.gguf")
    assert len(params) == 2 * 2 * len(TARGETS) and all(p.requires_grad for p in params)
    layer = fresh.get_submodule("blk.1.attn_k")
    assert isinstance(layer, nn.LoRALinear) and (layer.r, layer.alpha) == (4, 8.0)
    ids = np.random.default_rng(0).integers(0, 96, (1, 10))
    with ggrad.no_grad():
        ours = fresh(ggrad.tensor(ids)).numpy()
        np.testing.assert_allclose(ours, model(ggrad.tensor(ids)).numpy(), rtol=1e-6, atol=1e-6)
    with torch.no_grad():
        ref = peft_model(torch.tensor(ids)).logits.numpy()
    assert float(np.abs(ours - ref).max() / np.abs(ref).max()) < 1e-4


def _adapter(tmp_path, tensors, **meta):
    metadata = {"general.architecture": "llama", "general.type": "adapter", "adapter.type": "lora",
                "adapter.lora.alpha": np.float32(4.0), **meta}
    path = tmp_path / "bad_adapter.gguf"
    zeros = [(name, ggrad.ggml.f32, [shape[1], shape[0]], np.zeros(shape, np.float32).view(np.uint8))
             for name, shape in tensors]
    gguf_io.write(path, metadata, zeros)
    return path


@pytest.mark.parametrize("tensors, meta, message", [
    ([("blk.0.attn_q.weight.lora_a", (2, 64)), ("blk.0.attn_q.weight.lora_b", (64, 2))], {"adapter.type": "x"},
     "not a LoRA adapter"),
    ([("blk.0.attn_q.weight.lora_a", (2, 64)), ("blk.0.attn_q.weight.lora_b", (64, 2))],
     {"general.architecture": "qwen2"}, "adapts a 'qwen2' model"),
    ([("blk.0.attn_q.weight.lora_a", (2, 64))], {}, "lacks blk.0.attn_q.weight.lora_b"),
    ([("blk.9.attn_q.weight.lora_a", (2, 64)), ("blk.9.attn_q.weight.lora_b", (64, 2))], {}, "has no such layer"),
    ([("blk.0.attn_norm.weight.lora_a", (2, 64)), ("blk.0.attn_norm.weight.lora_b", (64, 2))], {}, "not a Linear"),
    ([("blk.0.attn_q.weight.lora_a", (2, 64)), ("blk.0.attn_q.weight.lora_b", (32, 2))], {}, "do not fit"),
    ([("blk.0.attn_q.weight.lora_a", (2, 64)), ("blk.0.attn_q.weight.lora_b", (64, 2)), ("extra", (1, 4))], {},
     "not half of a LoRA pair"),
])
def test_load_lora_gguf_refuses_bad_adapters(tmp_path, tensors, meta, message):
    model = gm.from_gguf(write_gguf(tiny_model(), tmp_path / "m.gguf"))
    before = sorted(n for n, _ in model.named_modules())
    with pytest.raises(ggrad.ggml.FormatError, match=message):
        gm.load_lora_gguf(model, _adapter(tmp_path, tensors, **meta))
    assert sorted(n for n, _ in model.named_modules()) == before   # checked before anything changed
    path = _adapter(tmp_path, [("blk.0.attn_q.weight.lora_a", (2, 64)), ("blk.0.attn_q.weight.lora_b", (64, 2))])
    gm.load_lora_gguf(model, path)
    with pytest.raises(ggrad.ggml.FormatError, match="already has a LoRA adapter"):
        gm.load_lora_gguf(model, path)
