"""Incremental decoding: index_write_ (in-place writes), KVCache, cached attention, and sampling."""

import numpy as np
import pytest

import ggrad
from ggrad import nn
from ggrad.autograd.ops.inplace import index_write_
from ggrad.nn.generation import choose_next, penalize_repetition, sample_next


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---- index_write_ ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_index_write_matches_numpy_and_writes_in_place(dim):
    base = randn(3, 5, 4)
    target = ggrad.tensor(base).realize()
    index = {0: [2, 0], 1: [4, 1], 2: [3, 1]}[dim]
    src_shape = list(base.shape)
    src_shape[dim] = 2
    src = randn(*src_shape, seed=1)
    with ggrad.no_grad():
        out = index_write_(target, dim, index, ggrad.tensor(src))
    want = base.copy()
    np.moveaxis(want, dim, 0)[index] = np.moveaxis(src, dim, 0)
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(target.numpy(), want)   # the target's own memory holds the write


def test_index_write_chains_writes_made_before_a_compute():
    target = ggrad.zeros(2, 6, 3).realize()
    with ggrad.no_grad():
        first = index_write_(target, 1, 0, ggrad.ones(2, 1, 3))
        second = index_write_(target, 1, [2, 3], ggrad.full((2, 2, 3), 2.0))
        del first   # the first write must land even though nothing holds its result
    want = np.zeros((2, 6, 3), np.float32)
    want[:, 0] = 1.0
    want[:, 2:4] = 2.0
    np.testing.assert_array_equal(second.numpy(), want)
    np.testing.assert_array_equal(target.numpy(), want)


def test_index_write_result_reads_after_the_write_in_the_same_graph():
    target = ggrad.zeros(1, 4, 2).realize()
    with ggrad.no_grad():
        written = index_write_(target, 1, 3, ggrad.full((1, 1, 2), 5.0))
        total = written.sum()
    assert total.item() == 10.0


def test_index_write_f16_target():
    target = ggrad.zeros(2, 3, dtype=ggrad.float16).realize()
    with ggrad.no_grad():
        out = index_write_(target, 0, 1, ggrad.tensor([[1.5, -2.0, 3.25]]))
    np.testing.assert_array_equal(out.numpy(), [[0, 0, 0], [1.5, -2.0, 3.25]])


def test_index_write_errors():
    target = ggrad.zeros(2, 4, 3).realize()
    with ggrad.no_grad():
        with pytest.raises(IndexError, match="out of range"):
            index_write_(target, 1, [4], ggrad.zeros(2, 1, 3))
        with pytest.raises(IndexError, match="out of range"):
            index_write_(target, 1, [-1], ggrad.zeros(2, 1, 3))
        with pytest.raises(ggrad.ShapeError, match="should be"):
            index_write_(target, 1, [0, 1], ggrad.zeros(2, 1, 3))
        with pytest.raises(ggrad.ShapeError, match="empty"):
            index_write_(target, 1, [], ggrad.zeros(2, 0, 3))
        with pytest.raises(TypeError, match="1-D sequence of ints"):
            index_write_(target, 1, [0.5], ggrad.zeros(2, 1, 3))
        with pytest.raises(ggrad.DTypeError, match="float32 or float16"):
            index_write_(ggrad.zeros(2, 4, dtype=ggrad.int32).realize(), 1, [0], ggrad.zeros(2, 1))
        with pytest.raises(ggrad.ShapeError, match="contiguous"):
            index_write_(target.transpose(0, 1), 1, [0], ggrad.zeros(4, 1, 3))
    src = ggrad.zeros(2, 1, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="not differentiable"):
        index_write_(target, 1, [0], src)


# ---- KVCache and cached attention ----------------------------------------------------------------------
def test_kv_cache_bounds_and_shapes():
    cache = nn.KVCache(2, 1, 2, 4, 3)
    assert len(cache) == 2 and cache.length == 0 and cache.max_len == 4
    with ggrad.no_grad():
        cache[0].update(ggrad.zeros(1, 2, 3, 3), ggrad.zeros(1, 2, 3, 3))
        with pytest.raises(ValueError, match="exceed the cache's max_len 4"):
            cache[0].update(ggrad.zeros(1, 2, 2, 3), ggrad.zeros(1, 2, 2, 3))
        with pytest.raises(ggrad.ShapeError, match="should be"):
            cache[1].update(ggrad.zeros(1, 3, 1, 3), ggrad.zeros(1, 3, 1, 3))
    assert cache.length == 3 and "length=3/4" in repr(cache)
    with pytest.raises(ValueError, match="max_len must be a positive integer"):
        nn.KVCache(2, 1, 2, 0, 3)


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("chunks", [[6], [1, 1, 1, 1, 1, 1], [3, 1, 2]])
def test_cached_transformer_block_matches_the_full_causal_forward(chunks, static):
    ggrad.manual_seed(0)
    block = nn.TransformerBlock(16, 4).eval()
    x = randn(2, 6, 16)
    with ggrad.no_grad():
        full = block(ggrad.tensor(x)).numpy()
        cache = nn.KVCache(1, 2, 4, 8, 4, static=static)
        parts, start = [], 0
        for n in chunks:   # several positions after cached ones need the offset causal mask
            parts.append(block(ggrad.tensor(x[:, start:start + n]), kv_cache=cache[0]).numpy())
            start += n
    np.testing.assert_allclose(np.concatenate(parts, 1), full, rtol=1e-5, atol=1e-5)
    assert cache.length == 6


def test_static_cache_without_causality_attends_to_the_filled_positions_only():
    """A non-causal block over a static cache: the positions not written yet (zeros) must not take part."""
    ggrad.manual_seed(0)
    block = nn.TransformerBlock(16, 4, causal=False).eval()
    x = randn(1, 3, 16)
    with ggrad.no_grad():
        growing, static = nn.KVCache(1, 1, 4, 8, 4), nn.KVCache(1, 1, 4, 8, 4, static=True)
        for cache in (growing, static):
            block(ggrad.tensor(x[:, :2]), kv_cache=cache[0])
        want = block(ggrad.tensor(x[:, 2:]), kv_cache=growing[0]).numpy()
        got = block(ggrad.tensor(x[:, 2:]), kv_cache=static[0]).numpy()
        assert static[0].update(ggrad.zeros(1, 4, 1, 4), ggrad.zeros(1, 4, 1, 4))[0].shape == (1, 4, 8, 4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_kv_cache_serves_self_attention_only():
    mha = nn.MultiHeadAttention(8, 2, batch_first=True)
    cache = nn.KVCache(1, 1, 2, 4, 4)
    x, y = ggrad.tensor(randn(1, 2, 8)), ggrad.tensor(randn(1, 2, 8, seed=1))
    with ggrad.no_grad(), pytest.raises(ValueError, match="self-attention only"):
        mha(x, y, y, kv_cache=cache[0])


# ---- sampling --------------------------------------------------------------------------------------
def test_greedy_and_degenerate_sampling_are_argmax():
    logits = randn(5, 11)
    want = logits.argmax(-1)
    np.testing.assert_array_equal(sample_next(logits, temperature=0), want)
    np.testing.assert_array_equal(sample_next(logits, top_k=1), want)
    np.testing.assert_array_equal(sample_next(logits, top_p=1e-9), want)   # the nucleus is the top token


def test_sampling_is_seeded_and_follows_the_distribution():
    logits = np.log(np.array([[0.1, 0.2, 0.3, 0.4]] * 20000))
    ggrad.manual_seed(3)
    a = sample_next(logits)
    ggrad.manual_seed(3)
    np.testing.assert_array_equal(a, sample_next(logits))
    freq = np.bincount(a, minlength=4) / len(a)
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.3, 0.4], atol=0.015)
    # temperature 0.5 squares the probabilities (renormalised)
    hot = np.bincount(sample_next(logits, temperature=0.5), minlength=4) / len(a)
    np.testing.assert_allclose(hot, np.array([1, 4, 9, 16]) / 30, atol=0.015)


def test_top_k_and_top_p_keep_only_their_candidates():
    logits = np.log(np.array([[0.05, 0.4, 0.1, 0.3, 0.15]] * 20000))
    ggrad.manual_seed(0)
    top2 = np.bincount(sample_next(logits, top_k=2), minlength=5) / 20000
    np.testing.assert_allclose(top2, [0, 0.4 / 0.7, 0, 0.3 / 0.7, 0], atol=0.015)
    assert top2[[0, 2, 4]].sum() == 0
    # nucleus 0.8: 0.4 + 0.3 = 0.7 < 0.8, so 0.15 joins; 0.1 and 0.05 stay out
    nucleus = np.bincount(sample_next(logits, top_p=0.8), minlength=5) / 20000
    np.testing.assert_allclose(nucleus, [0, 0.4 / 0.85, 0, 0.3 / 0.85, 0.15 / 0.85], atol=0.015)
    assert nucleus[[0, 2]].sum() == 0
    both = sample_next(logits, top_k=3, top_p=0.5)   # top 3 renormalised: 0.47, 0.35, 0.18 -> {1, 3}
    assert set(np.unique(both)) == {1, 3}
    # min-p 0.3: at least 0.3 * 0.4 = 0.12 likely: 0.4, 0.3, 0.15 stay (as transformers' MinPLogitsWarper)
    floor = np.bincount(sample_next(logits, min_p=0.3), minlength=5) / 20000
    np.testing.assert_allclose(floor, [0, 0.4 / 0.85, 0, 0.3 / 0.85, 0.15 / 0.85], atol=0.015)
    assert floor[[0, 2]].sum() == 0
    assert set(np.unique(sample_next(logits, min_p=1.0))) == {1}   # only the most likely


def test_sampling_argument_errors():
    logits = randn(1, 4)
    for kwargs, match in (({"temperature": -1.0}, "temperature"), ({"top_k": 0}, "top_k"),
                          ({"top_p": 0.0}, "top_p"), ({"top_p": 1.5}, "top_p"), ({"min_p": -0.1}, "min_p"),
                          ({"min_p": 1.5}, "min_p"), ({"min_p": True}, "min_p"),
                          ({"repetition_penalty": 0.0}, "repetition_penalty"),
                          ({"repetition_penalty": "2"}, "repetition_penalty")):
        with pytest.raises(ValueError, match=match):
            sample_next(logits, **kwargs)
    with pytest.raises(ValueError, match="batch, vocab"):
        sample_next(randn(4))


def test_float16_cache_stays_close_to_the_full_forward():
    ggrad.manual_seed(0)
    block = nn.TransformerBlock(16, 4).eval()
    x = randn(1, 5, 16)
    with ggrad.no_grad():
        full = block(ggrad.tensor(x)).numpy()
        cache = nn.KVCache(1, 1, 4, 5, 4, dtype=ggrad.float16)
        parts = [block(ggrad.tensor(x[:, :2]), kv_cache=cache[0]).numpy()]
        parts += [block(ggrad.tensor(x[:, i:i + 1]), kv_cache=cache[0]).numpy() for i in range(2, 5)]
    assert cache[0].keys.dtype is ggrad.float16
    np.testing.assert_allclose(np.concatenate(parts, 1), full, atol=5e-3)   # keys and values rounded to f16


@pytest.mark.parametrize("rule", [dict(temperature=0.7), dict(top_k=5), dict(top_p=0.8), dict(temperature=0),
                                  dict(temperature=1.3, top_k=8, top_p=0.6), dict(top_k=1), dict(min_p=0.2),
                                  dict(temperature=0.8, top_k=10, top_p=0.9, min_p=0.1)])
def test_the_device_rule_draws_what_sample_next_draws(rule):
    """choose_next (ops of the decode step's graph) against sample_next (the host, float64), same uniforms."""
    logits = randn(64, 50, seed=3) * 2.0
    ggrad.manual_seed(11)
    host = sample_next(logits, **rule)
    ggrad.manual_seed(11)
    u = ggrad.autograd.factory.generator().random(64).astype(np.float32)[:, None]
    greedy = rule.get("temperature") == 0 or rule.get("top_k") == 1
    device = choose_next(ggrad.tensor(logits), None if greedy else ggrad.tensor(u), **rule).numpy()
    np.testing.assert_array_equal(device, host)


# ---- repetition penalty ------------------------------------------------------------------------------
@pytest.mark.parametrize("penalty", [1.3, 0.7, 2.0])
def test_repetition_penalty_is_transformers_rule(penalty):
    torch = pytest.importorskip("torch")
    processors = pytest.importorskip("transformers.generation.logits_process")
    logits = randn(6, 40, seed=5) * 3.0
    ids = np.random.default_rng(2).integers(0, 40, (6, 12))   # repeats within a row included
    want = processors.RepetitionPenaltyLogitsProcessor(penalty)(torch.tensor(ids), torch.tensor(logits)).numpy()
    np.testing.assert_array_equal(penalize_repetition(logits, ids, penalty), want)
    seen = ggrad.tensor(ids.astype(np.int32))
    on_device = choose_next(ggrad.tensor(logits), None, 0, repetition_penalty=penalty, seen=seen).numpy()
    np.testing.assert_array_equal(on_device, want.argmax(-1))
    np.testing.assert_array_equal(sample_next(logits, 0, repetition_penalty=penalty, input_ids=ids),
                                  want.argmax(-1))


@pytest.mark.parametrize("rule", [dict(temperature=0.7), dict(top_k=5, top_p=0.8), dict(min_p=0.2)])
def test_the_device_rule_with_a_repetition_penalty_draws_what_sample_next_draws(rule):
    logits = randn(64, 50, seed=3) * 2.0
    ids = np.random.default_rng(4).integers(0, 50, (64, 20)).astype(np.int32)
    ggrad.manual_seed(11)
    host = sample_next(logits, **rule, repetition_penalty=1.5, input_ids=ids)
    ggrad.manual_seed(11)
    u = ggrad.autograd.factory.generator().random(64).astype(np.float32)[:, None]
    device = choose_next(ggrad.tensor(logits), ggrad.tensor(u), **rule, repetition_penalty=1.5,
                         seen=ggrad.tensor(ids)).numpy()
    np.testing.assert_array_equal(device, host)
    with pytest.raises(ValueError, match="input_ids"):
        sample_next(logits, repetition_penalty=1.5)
