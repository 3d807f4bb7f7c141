"""ggrad.models.from_gguf against transformers on the same weights: logits, greedy decoding, GGML types."""

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

import ggrad  # noqa: E402
import ggrad.models as gm  # noqa: E402
from ggrad.autograd import execution, lowering  # noqa: E402
from ggrad.autograd.repacked_weights import twin_of  # noqa: E402
from ggrad.ggml import gguf as gguf_io  # noqa: E402
from ggrad.ggml.repack import repack_buffer_type  # noqa: E402
from ggrad.nn.quantized import QuantizedParameter  # noqa: E402

from hf_gguf import tiny_model, write_gguf  # noqa: E402
import llama_reference  # noqa: E402

CASES = {
    "llama-gqa": dict(),
    "llama-tied": dict(tied=True),
    "llama-mha": dict(kv_heads=4),
    "llama3-rope-scaling": dict(llama3_scaling=True, rope_theta=500000.0),
    "linear-rope-scaling": dict(linear_scaling=4.0),
    "llama-yarn": dict(yarn={"factor": 4.0, "original_max_position_embeddings": 32}),
    "qwen2-yarn-betas-attention-factor": dict(arch="qwen2", yarn={"factor": 2.0, "original_max_position_embeddings": 64,
                                                                   "beta_fast": 16.0, "beta_slow": 2.0,
                                                                   "attention_factor": 1.3}),
    "mistral-sliding-window": dict(arch="mistral", sliding_window=7),
    "qwen2": dict(arch="qwen2"),
    "qwen2-tied-mqa": dict(arch="qwen2", tied=True, kv_heads=1),
}


def _ids(shape, vocab=96, seed=0):
    return np.random.default_rng(seed).integers(0, vocab, shape)


def _hf_logits(hf, ids):
    with torch.no_grad():
        return hf(torch.tensor(ids)).logits.numpy()


def _logits(model, ids):
    with ggrad.no_grad():
        return model(ggrad.tensor(ids)).numpy()


def _relative(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("case", CASES)
def test_f32_logits_equal_transformers(case, tmp_path):
    hf = tiny_model(**CASES[case])
    model = gm.from_gguf(write_gguf(hf, tmp_path / "m.gguf"))
    ids = _ids((2, 24))
    out = _logits(model, ids)
    assert out.dtype == np.float32 and out.shape == (2, 24, 96)
    assert _relative(out, _hf_logits(hf, ids)) < 1e-4


def test_config_and_state_dict(tmp_path):
    hf = tiny_model(arch="qwen2", kv_heads=1)
    model = gm.from_gguf(write_gguf(hf, tmp_path / "m.gguf", "q8_0"))
    c = model.config
    assert (c.architecture, c.vocab_size, c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim,
            c.intermediate_size, c.context_length) == ("qwen2", 96, 64, 2, 4, 1, 16, 128, 128)
    assert c.rope_mode == "neox" and c.attention_bias and not c.tie_word_embeddings
    state = model.state_dict()
    reader = gguf.GGUFReader(str(tmp_path / "m.gguf"))
    assert set(state) == {t.name for t in reader.tensors}
    for t in reader.tensors:
        assert state[t.name].dtype.name == t.tensor_type.name.lower()
        assert state[t.name].shape == tuple(int(n) for n in reversed(t.shape))
    params = dict(model.named_parameters())
    assert isinstance(params["blk.0.attn_q.weight"], QuantizedParameter)
    assert not params["blk.0.attn_q.weight"].requires_grad and params["blk.0.attn_q.bias"].requires_grad


def test_llama3_rope_factors_are_used(tmp_path):
    """The rope_freqs tensor matters: without it (plain RoPE) the logits are far from transformers'."""
    hf = tiny_model(llama3_scaling=True, rope_theta=500000.0)
    model = gm.from_gguf(write_gguf(hf, tmp_path / "m.gguf"))
    assert model.rope_freqs is not None
    ids = _ids((1, 40))
    assert _relative(_logits(model, ids), _hf_logits(hf, ids)) < 1e-4
    model.rope_freqs = None
    assert _relative(_logits(model, ids), _hf_logits(hf, ids)) > 1e-3


def _dequantized(path):
    """{name: float array}, {name: type name} of a GGUF file read by gguf-py (not by ggrad)."""
    tensors, types = {}, {}
    for t in gguf.GGUFReader(str(path)).tensors:
        shape = [int(n) for n in reversed(t.shape)]
        tensors[t.name] = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32)
        types[t.name] = t.tensor_type.name.lower()
    return tensors, types


@pytest.mark.parametrize("arch, dtype", [(a, t) for a in ("llama", "qwen2") for t in ("q8_0", "q4_0", "q5_0")]
                         + [("llama", "q4_K"), ("qwen2", "q6_K")])
def test_quantized_logits_round_as_ggml(arch, dtype, tmp_path):
    """Against a numpy forward that quantizes each product's activations to q8_0 as GGML's CPU mul_mat does.
    GGML's x86 kernels round x * 127/amax to nearest-even where the reference rounds x / (amax/127) half away
    from zero: a value on a tie can land one step apart, which moves that token's logits by up to ~1e-2. So:
    almost every logit equals the reference to float32 sums, and every one is within 1e-2 — while the
    reference that does not round the activations is off for most logits. The K-quants (blocks of 256) take
    q8_K activations (a float32 scale per 256 values)."""
    hf = tiny_model(arch=arch, **({"hidden": 256, "intermediate": 512} if dtype.endswith("K") else {}))
    path = write_gguf(hf, tmp_path / "m.gguf", dtype)
    model = gm.from_gguf(path)
    ids = _ids((2, 20))
    out = _logits(model, ids)
    tensors, types = _dequantized(path)
    ref = llama_reference.forward(tensors, types, model.config, ids)
    unrounded = llama_reference.forward(tensors, {k: "f32" for k in types}, model.config, ids)
    scale = np.abs(ref).max()
    close = np.abs(out - ref) <= 1e-5 * scale
    assert model.state_dict()["blk.0.ffn_down.weight"].dtype.name == dtype.lower()
    assert close.mean() > 0.9 and _relative(out, ref) < 2e-2
    assert (np.abs(out - unrounded) <= 1e-5 * scale).mean() < 0.5


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_weights(dtype, tmp_path):
    """f16 weights: GGML's product takes the activations in f16; within 2e-3 of the reference that rounds them
    so (GGML's single-row f16 dot sums in its own order and precision, so no tighter bound holds for every row;
    the f16 rounding itself moves the logits by ~1e-3). bf16 weights are widened to f32 for the product: equal to
    the float32 reference on the bf16 values."""
    hf = tiny_model()
    path = write_gguf(hf, tmp_path / "m.gguf", dtype)
    model = gm.from_gguf(path)
    assert model.state_dict()["blk.0.ffn_up.weight"].dtype.name == dtype
    ids = _ids((2, 20))
    tensors, types = _dequantized(path)
    if dtype == "bf16":
        types = {k: "f32" for k in types}
    ref = llama_reference.forward(tensors, types, model.config, ids)
    assert _relative(_logits(model, ids), ref) < (2e-3 if dtype == "f16" else 1e-4)


@pytest.mark.parametrize("case", ["llama-gqa", "qwen2-tied-mqa", "mistral-sliding-window", "llama-yarn"])
def test_greedy_generation_equals_transformers(case, tmp_path):
    hf = tiny_model(**CASES[case])
    model = gm.from_gguf(write_gguf(hf, tmp_path / "m.gguf"))
    ids = _ids((2, 6), seed=3)
    ref = hf.generate(torch.tensor(ids), attention_mask=torch.ones(ids.shape, dtype=torch.long), max_new_tokens=24,
                      do_sample=False, pad_token_id=0).numpy()
    before = ggrad.stats()["step_replays"]
    out = model.generate(ggrad.tensor(ids), 24, temperature=0).numpy()
    assert ggrad.stats()["step_replays"] - before >= 20   # the one-token step replayed, not rebuilt
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(model.generate(ggrad.tensor(ids), 24, temperature=0, use_cache=False).numpy(), ref)


@pytest.mark.parametrize("choice", ["kernel", "softmax"])
def test_decode_attention_choices_give_the_uncached_tokens(choice, tmp_path):
    """The decode step's attention by ggrad's kernel (grouped-query heads over the cache, a sliding window in
    the mask) or composed: the tokens of the uncached forward, and the kernel computed only where chosen."""
    hf = tiny_model(**CASES["mistral-sliding-window"])
    model = gm.from_gguf(write_gguf(hf, tmp_path / "m.gguf"))
    assert model.config.num_kv_heads < model.config.num_heads
    ids = _ids((2, 6), seed=3)
    plain = model.generate(ggrad.tensor(ids), 16, temperature=0, use_cache=False).numpy()
    device = model.token_embd.weight.device
    choices = dataclasses.replace(lowering.for_device(device), decode_attention=choice)
    with execution.forced_lowering(device, choices), ggrad.profile() as prof:
        cached = model.generate(ggrad.tensor(ids), 16, temperature=0).numpy()
    np.testing.assert_array_equal(cached, plain)
    assert ("FLASH_ATTN" in prof.by_op()) == (choice == "kernel")


def test_left_padded_batch_generation(tmp_path):
    """A padded row generates what it generates alone (positions count its tokens only)."""
    hf = tiny_model()
    model = gm.from_gguf(write_gguf(hf, tmp_path / "m.gguf"))
    short, long = _ids((1, 3), seed=1), _ids((1, 7), seed=2)
    batch = np.concatenate([np.concatenate([np.zeros((1, 4), np.int64), short], 1), long])
    mask = np.concatenate([np.concatenate([np.zeros((1, 4)), np.ones((1, 3))], 1), np.ones((1, 7))]).astype(np.int64)
    out = model.generate(ggrad.tensor(batch), 10, temperature=0, attention_mask=mask).numpy()
    alone = model.generate(ggrad.tensor(short), 10, temperature=0).numpy()
    np.testing.assert_array_equal(out[0, 4:], alone[0])
    np.testing.assert_array_equal(out[1], model.generate(ggrad.tensor(long), 10, temperature=0).numpy()[0])


def test_int64_input_and_growing_cache(tmp_path):
    hf = tiny_model()
    model = gm.from_gguf(write_gguf(hf, tmp_path / "m.gguf"))
    ids = _ids((1, 12))
    full = _logits(model, ids)
    cache = model.new_kv_cache(1)
    with ggrad.no_grad():
        first = model(ggrad.tensor(ids[:, :8]), kv_cache=cache).numpy()
        rest = model(ggrad.tensor(ids[:, 8:11]), kv_cache=cache).numpy()
        last = model(ggrad.tensor(ids[:, 11:]), kv_cache=cache).numpy()   # one token: the decode attention
    np.testing.assert_allclose(np.concatenate([first, rest, last], 1), full, rtol=1e-5, atol=1e-5)
    with ggrad.no_grad():
        last = model(ggrad.tensor(ids), last_only=True).numpy()
    assert last.shape == (1, 1, 96)
    np.testing.assert_allclose(last, full[:, -1:], rtol=1e-5, atol=1e-5)


def test_kv_cache_overflow_and_context(tmp_path):
    model = gm.from_gguf(write_gguf(tiny_model(), tmp_path / "m.gguf"), context=16)
    assert model.context == 16 and model.new_kv_cache(1).max_len == 16
    cache = model.new_kv_cache(1)
    with ggrad.no_grad():
        model(ggrad.tensor(_ids((1, 12))), kv_cache=cache)
        with pytest.raises(ValueError, match="exceed the KV cache's 16"):
            model(ggrad.tensor(_ids((1, 5))), kv_cache=cache)
        assert model(ggrad.tensor(_ids((1, 40)))).shape == (1, 40, 96)   # without a cache: any length


def test_sliding_window_and_yarn_metadata(tmp_path):
    """The keys are read and written back; a window masks the cached steps as a whole forward does."""
    hf = tiny_model(arch="mistral", sliding_window=5, yarn={"factor": 2.0, "original_max_position_embeddings": 64,
                                                            "beta_fast": 8.0})
    model = gm.from_gguf(write_gguf(hf, tmp_path / "m.gguf"))
    c = model.config
    assert (c.sliding_window, c.rope_scaling, c.rope_factor, c.rope_original_context, c.yarn_beta_fast,
            c.yarn_beta_slow) == (5, "yarn", 2.0, 64, 8.0, 1.0)
    model.save_gguf(tmp_path / "again.gguf")
    again = gm.from_gguf(tmp_path / "again.gguf").config
    assert (again.sliding_window, again.yarn_beta_fast, again.rope_original_context) == (5, 8.0, 64)
    ids = _ids((1, 14))
    full = _logits(model, ids)
    cache = model.new_kv_cache(1)
    with ggrad.no_grad():
        parts = [model(ggrad.tensor(ids[:, a:b]), kv_cache=cache).numpy()
                 for a, b in ((0, 6), (6, 11), (11, 12), (12, 13), (13, 14))]   # one-token steps: decode attention
    np.testing.assert_allclose(np.concatenate(parts, 1), full, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(full, _hf_logits(hf, ids), rtol=1e-4, atol=1e-4 * np.abs(full).max())


def test_bad_sliding_window_refused(tmp_path):
    meta = dict(gguf_io.read(write_gguf(tiny_model(), tmp_path / "m.gguf")).metadata)
    assert "llama.attention.sliding_window" not in meta
    meta["llama.attention.sliding_window"] = np.int32(-3)
    with pytest.raises(ggrad.ggml.FormatError, match="sliding_window=-3"):
        gm.ModelConfig.from_metadata(meta, "m.gguf")


@pytest.mark.parametrize("tied", [False, True])
def test_repacked_q4_0_weights_on_the_cpu(tied, tmp_path):
    """from_gguf multiplies q4_0 weights through GGML's CPU_REPACK copies (token_embd only when the output
    layer reads it): the logits and greedy tokens of the file's own layout."""
    if repack_buffer_type() is None:
        pytest.skip("this GGML build has no CPU_REPACK buffer type")
    path = write_gguf(tiny_model(tied=tied), tmp_path / "m.gguf", "q4_0")
    model, plain = gm.from_gguf(path), gm.from_gguf(path, repack=False)
    assert twin_of(plain.blk[0].attn_q.weight) is None
    if twin_of(model.blk[0].attn_q.weight) is None:
        pytest.skip("GGML's CPU has no repacked q4_0 layout here (no AVX2 / NEON dot products)")
    assert (twin_of(model.token_embd.weight) is not None) == tied
    ids = _ids((2, 12))
    ours, ref = _logits(model, ids), _logits(plain, ids)
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    np.testing.assert_array_equal(model.generate(ggrad.tensor(ids), 8, temperature=0).numpy(),
                                  plain.generate(ggrad.tensor(ids), 8, temperature=0).numpy())
