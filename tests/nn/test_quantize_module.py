"""ggrad.nn.quantize_: a model's weights quantized in place, checked against the dequantize-then-f32 model."""

import warnings

import numpy as np
import pytest

import ggrad
from ggrad import nn
from ggrad.autograd.raw import to_raw
from ggrad.examples.char_gpt import CharGPT

TYPES = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0"]


def tiny_gpt(seed=0):
    ggrad.manual_seed(seed)
    return CharGPT(96, 64, 1, 2, 16)


def ids(seed=0, batch=2, t=16):
    return ggrad.tensor(np.random.default_rng(seed).integers(0, 96, (batch, t)).astype(np.int32))


def dequantized_copy(model, seed=0):
    """A float model of the same architecture holding the dequantized values of `model`'s weights."""
    ref = tiny_gpt(seed)
    ref.load_state_dict({k: v.dequantize() for k, v in model.state_dict().items()})
    return ref


@pytest.mark.parametrize("name", TYPES)
def test_quantized_gpt_matches_the_dequantized_float_model(name, one_thread):
    model = nn.quantize_(tiny_gpt(), name)
    weights = {n: p.dtype.name for n, p in model.named_parameters() if p.ndim == 2}
    assert set(weights.values()) == {name}, weights
    assert type(model.tok.weight) is nn.QuantizedParameter and not model.tok.weight.requires_grad
    ref = dequantized_copy(model)
    x = ids()
    got, want = model(x).numpy(), ref(x).numpy()
    # GGML rounds the activations to 8 bits inside the quantized dot products: close, not equal
    assert np.abs(got - want).max() < 0.02 * np.abs(want).max() + 1e-3
    assert got.argmax(-1).tolist() != [] and (got.argmax(-1) == want.argmax(-1)).mean() > 0.9


def test_embedding_lookup_of_a_quantized_table_is_get_rows_of_the_blocks():
    emb = nn.Embedding(10, 64)
    table = emb.weight.numpy()
    nn.quantize_(emb, "q4_1")
    index = np.array([[3, 0], [9, 3]], np.int32)
    out = emb(ggrad.tensor(index))
    deq = emb.weight.dequantize().numpy()
    np.testing.assert_array_equal(out.numpy(), deq[index])
    assert 0 < np.abs(deq - table).max() < 0.25 * np.abs(table).max()


def test_linear_with_a_quantized_weight_against_numpy_and_gradients_to_input_and_bias(one_thread):
    layer = nn.Linear(64, 8)
    nn.quantize_(layer, "q8_0")
    w, b = layer.weight.dequantize().numpy(), layer.bias.numpy()
    x_np = np.random.default_rng(3).standard_normal((4, 64)).astype(np.float32)
    x = ggrad.tensor(x_np, requires_grad=True)
    y = layer(x)
    np.testing.assert_allclose(y.numpy(), x_np @ w.T + b, atol=0.02 * np.abs(x_np @ w.T).max())
    g = np.random.default_rng(4).standard_normal((4, 8)).astype(np.float32)
    y.backward(ggrad.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), g @ w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(layer.bias.grad.numpy(), g.sum(0), rtol=1e-5, atol=1e-5)
    assert layer.weight.grad is None


def test_training_a_quantized_model_updates_only_the_float_parameters(one_thread):
    model = nn.quantize_(tiny_gpt(), "q4_0")
    before = {n: to_raw(p).tobytes() for n, p in model.named_parameters()}
    opt = ggrad.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    assert len(opt.param_groups[0]["params"]) == sum(not p.dtype.is_quantized for p in model.parameters())
    x = ids()
    for _ in range(2):
        loss = ggrad.cross_entropy(model(x).reshape(-1, 96), x.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    for n, p in model.named_parameters():
        changed = to_raw(p).tobytes() != before[n]
        assert changed == (not p.dtype.is_quantized), n


def test_a_gradient_into_a_quantized_weight_is_refused_naming_it():
    model = nn.quantize_(tiny_gpt(), "q8_0")
    with pytest.raises(RuntimeError, match=r"blocks\.0\.fc1\.weight \(of a Linear\) is quantized \(q8_0\) and "
                                           r"frozen"):
        model.blocks[0].fc1.weight.requires_grad_(True)
    with pytest.raises(RuntimeError, match=r"tok\.weight \(of a Embedding\) is quantized"):
        model.requires_grad_()
    model.requires_grad_(False)     # freezing stays allowed
    assert not any(p.requires_grad for p in model.parameters())


def test_choosing_modules_by_names_type_and_predicate():
    model = nn.quantize_(tiny_gpt(), "q8_0", modules=["blocks.0.fc1", "pos"])
    assert {n for n, p in model.named_parameters() if p.dtype.is_quantized} == {"blocks.0.fc1.weight", "pos.weight"}
    model = nn.quantize_(tiny_gpt(), "q8_0", modules=nn.Linear)
    assert {n for n, p in model.named_parameters() if p.dtype.is_quantized} == {
        "blocks.0.attn.out_proj.weight", "blocks.0.fc1.weight", "blocks.0.fc2.weight"}
    model = nn.quantize_(tiny_gpt(), "q8_0", modules=(nn.Linear, nn.Embedding))
    assert [n for n, p in model.named_parameters() if p.ndim == 2 and not p.dtype.is_quantized] == [
        "blocks.0.attn.in_proj_weight"]
    model = nn.quantize_(tiny_gpt(), "q8_0", modules=lambda name, m: name.endswith("fc2"))
    assert [n for n, p in model.named_parameters() if p.dtype.is_quantized] == ["blocks.0.fc2.weight"]
    with pytest.raises(ValueError, match="no submodule 'blocks.0.fc9'"):
        nn.quantize_(tiny_gpt(), "q8_0", modules=["blocks.0.fc9"])
    with pytest.raises(TypeError, match="'ln_f' is a LayerNorm; only Linear, Embedding, MultiHeadAttention"):
        nn.quantize_(tiny_gpt(), "q8_0", modules=["ln_f"])
    with pytest.raises(TypeError, match="modules must be None, a list of layer names"):
        nn.quantize_(tiny_gpt(), "q8_0", modules="fc1")


def test_bad_type_names_raise():
    with pytest.raises(ggrad.DTypeError, match="unknown dtype 'q9_0'"):
        nn.quantize_(tiny_gpt(), "q9_0")
    with pytest.raises(ggrad.DTypeError, match="quantize_: f16 is not a quantized GGML type"):
        nn.quantize_(tiny_gpt(), "f16")
    with pytest.raises(TypeError, match="expected a ggrad.nn.Module"):
        nn.quantize_(ggrad.randn(4, 32), "q8_0")


def test_rows_the_block_size_does_not_divide_stay_float_with_a_warning_or_raise_when_named():
    model = nn.Sequential(nn.Linear(48, 32), nn.Linear(32, 4))
    with pytest.warns(UserWarning, match=r"0\.weight \(Linear\) of shape \(32, 48\): rows of 48 values are not a "
                                         r"whole number of q4_0 blocks of 32"):
        nn.quantize_(model, "q4_0")
    assert model[0].weight.dtype is ggrad.float32 and model[0].weight.requires_grad
    assert model[1].weight.dtype.name == "q4_0"
    with pytest.raises(ggrad.ShapeError, match=r"quantize_: cannot quantize 0\.weight"):
        nn.quantize_(nn.Sequential(nn.Linear(48, 32)), "q4_0", modules=["0"])
    with pytest.warns(UserWarning, match="q4_k blocks of 256"):    # rows of 64 are too short for K-quants
        model = nn.quantize_(tiny_gpt(), "q4_K")
    assert [n for n, p in model.named_parameters() if p.dtype.is_quantized] == ["blocks.0.fc2.weight"]  # (64, 256)


def test_tied_weights_stay_tied_and_generate_runs_on_the_quantized_model(one_thread):
    model = tiny_gpt()
    shared = nn.Linear(64, 96, bias=False)
    shared.weight = model.tok.weight           # a second holder of the token table
    model.head = shared
    nn.quantize_(model, "q5_1", modules=[("tok")])
    assert model.head.weight is model.tok.weight and model.tok.weight.dtype.name == "q5_1"
    del model.head
    out = model.generate(ids(t=4), 6, top_k=1)
    want = dequantized_copy(model).generate(ids(t=4), 6, top_k=1)
    assert out.shape == (2, 10)
    assert (out.numpy() == want.numpy()).mean() > 0.8


@pytest.mark.parametrize("suffix", [".gguf", ".npz"])
def test_a_quantized_state_dict_round_trips_bit_for_bit(tmp_path, suffix, one_thread):
    model = nn.quantize_(tiny_gpt(), "q4_0")
    path = tmp_path / f"q{suffix}"
    ggrad.save(model.state_dict(), path)
    state = ggrad.load(path)
    assert state["blocks.0.fc1.weight"].dtype.name == "q4_0"
    fresh = nn.quantize_(tiny_gpt(seed=1), "q4_0")          # other values, same layout
    fresh.load_state_dict(state)
    for (n, p), (_, q) in zip(model.named_parameters(), fresh.named_parameters()):
        assert p.dtype is q.dtype and to_raw(p).tobytes() == to_raw(q).tobytes(), n
    assert type(fresh.tok.weight) is nn.QuantizedParameter
    np.testing.assert_array_equal(fresh(ids()).numpy(), model(ids()).numpy())


def test_the_gguf_file_holds_quantized_tensors_for_other_readers(tmp_path):
    gguf = pytest.importorskip("gguf")
    model = nn.quantize_(tiny_gpt(), "q8_0")
    ggrad.save(model.state_dict(), tmp_path / "q.gguf")
    tensors = {t.name: t for t in gguf.GGUFReader(tmp_path / "q.gguf").tensors}
    fc1 = tensors["blocks.0.fc1.weight"]
    assert fc1.tensor_type == gguf.GGMLQuantizationType.Q8_0 and list(fc1.shape) == [64, 256]
    np.testing.assert_array_equal(gguf.dequantize(fc1.data, fc1.tensor_type),
                                  model.blocks[0].fc1.weight.dequantize().numpy())
    assert tensors["ln_f.weight"].tensor_type == gguf.GGMLQuantizationType.F32


def test_float_values_load_into_a_quantized_model_by_quantizing_them_and_to_keeps_the_blocks():
    model = nn.quantize_(tiny_gpt(), "q8_0")
    floats = tiny_gpt(seed=2).state_dict()
    model.load_state_dict(floats)
    want = ggrad.quantize(floats["blocks.0.fc2.weight"], "q8_0")
    assert to_raw(model.blocks[0].fc2.weight).tobytes() == to_raw(want).tobytes()
    before = to_raw(model.tok.weight).tobytes()
    model.to("cpu").to(ggrad.float16)                 # quantized weights are not floats: kept as they are
    assert model.tok.weight.dtype.name == "q8_0" and to_raw(model.tok.weight).tobytes() == before


def test_errors_leave_the_model_unchanged_and_codebook_types_take_an_imatrix_per_weight():
    model = nn.Sequential(nn.Linear(32, 32), nn.Linear(48, 32))
    with pytest.raises(ggrad.ShapeError, match=r"cannot quantize 1\.weight"):
        nn.quantize_(model, "q8_0", modules=["0", "1"])
    assert not any(p.dtype.is_quantized for p in model.parameters())
    model = nn.Sequential(nn.Linear(256, 4), nn.Linear(256, 4))
    with pytest.raises(ggrad.DTypeError, match="iq2_xxs needs an importance matrix per weight; imatrix has none "
                                               r"for 1\.weight"):
        nn.quantize_(model, "iq2_xxs", imatrix={"0.weight": np.ones(256, np.float32)})
    assert not any(p.dtype.is_quantized for p in model.parameters())
    nn.quantize_(model, "iq2_xxs", imatrix={f"{i}.weight": np.ones(256, np.float32) for i in range(2)})
    assert [p.dtype.name for p in model.parameters() if p.ndim == 2] == ["iq2_xxs", "iq2_xxs"]
