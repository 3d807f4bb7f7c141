"""CharGPT.generate: the KV cache changes the cost, never the tokens."""

import gc
import weakref

import numpy as np
import pytest

import ggrad
from ggrad import nn
from ggrad.nn import generation
from ggrad.examples.char_gpt import VOCAB, CharGPT, decode, sample


def small_model(context=16, seed=0):
    """A random CharGPT that predicts varied tokens: with GPT's 0.02 embedding init its tied logits are
    near-ties, and with large embeddings every token predicts itself."""
    ggrad.manual_seed(seed)
    model = CharGPT(len(VOCAB), 32, 2, 4, context)
    rng = np.random.default_rng(seed)
    with ggrad.no_grad():
        for emb in (model.tok, model.pos):
            emb.weight.copy_(ggrad.tensor(rng.standard_normal(emb.weight.shape).astype(np.float32) * 0.5))
        model.ln_f.weight.copy_(ggrad.tensor(rng.standard_normal(model.ln_f.weight.shape).astype(np.float32)))
    return model


PROMPT = np.array([[5, 17, 40], [60, 2, 33]], dtype=np.int32)


def test_greedy_tokens_are_the_same_with_and_without_the_cache():
    model = small_model(context=40)
    cached = model.generate(PROMPT, 30, temperature=0).numpy()
    plain = model.generate(PROMPT, 30, temperature=0, use_cache=False).numpy()
    assert cached.shape == (2, 33) and cached.dtype == np.int32
    np.testing.assert_array_equal(cached[:, :3], PROMPT)
    np.testing.assert_array_equal(cached, plain)
    assert len(set(cached[0, 3:].tolist())) > 3   # a real sequence, not one repeated token


@pytest.mark.parametrize("static", [False, True])
def test_cached_logits_match_the_full_context_forward_at_every_step(static):
    model = small_model(context=24).eval()
    seq = np.random.default_rng(1).integers(0, len(VOCAB), (3, 24)).astype(np.int32)
    with ggrad.no_grad():
        full = model(ggrad.tensor(seq)).numpy()
        cache = model.new_kv_cache(3, static=static)
        steps = [model(ggrad.tensor(seq[:, :4]), kv_cache=cache).numpy()]
        for i in range(4, 24):
            steps.append(model(ggrad.tensor(seq[:, i:i + 1]), kv_cache=cache).numpy())
    # Float rounding only: most logits agree exactly here; GGML's CPU GELU reads an f16 table, so a
    # last-bit difference before it can move one position's logits by ~2e-5 of their scale.
    np.testing.assert_allclose(np.concatenate(steps, 1), full, rtol=1e-5, atol=5e-5 * np.abs(full).max())


def test_generation_past_the_context_crops_the_window_with_or_without_the_cache():
    model = small_model(context=8)
    cached = model.generate(PROMPT, 20, temperature=0).numpy()
    plain = model.generate(PROMPT, 20, temperature=0, use_cache=False).numpy()
    np.testing.assert_array_equal(cached, plain)
    # the last token is predicted from the last 8 tokens only (minGPT's crop)
    with ggrad.no_grad():
        logits = model.eval()(ggrad.tensor(cached[:, -9:-1])).numpy()[:, -1]
    np.testing.assert_array_equal(cached[:, -1], logits.argmax(-1))
    with ggrad.no_grad(), pytest.raises(ValueError, match="longer than the context 8"):
        cache = model.new_kv_cache(2)
        model(ggrad.tensor(cached[:, :6]), kv_cache=cache)
        model(ggrad.tensor(cached[:, 6:9]), kv_cache=cache)


def test_sampling_is_reproducible_and_top_k_1_is_greedy():
    model = small_model(context=32)
    ggrad.manual_seed(7)
    a = model.generate(PROMPT, 20, temperature=1.0, top_k=10, top_p=0.9).numpy()
    ggrad.manual_seed(7)
    b = model.generate(PROMPT, 20, temperature=1.0, top_k=10, top_p=0.9).numpy()
    ggrad.manual_seed(7)
    c = model.generate(PROMPT, 20, temperature=1.0, top_k=10, top_p=0.9, use_cache=False).numpy()
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)   # the same draws, the same logits up to rounding
    greedy = model.generate(PROMPT, 20, temperature=0).numpy()
    np.testing.assert_array_equal(model.generate(PROMPT, 20, temperature=2.0, top_k=1).numpy(), greedy)
    assert not (a == greedy).all()
    # min-p (transformers' rule): reproducible, the same with and without the cache, and min_p=1 is greedy
    ggrad.manual_seed(7)
    d = model.generate(PROMPT, 20, temperature=1.5, min_p=0.1).numpy()
    ggrad.manual_seed(7)
    np.testing.assert_array_equal(d, model.generate(PROMPT, 20, temperature=1.5, min_p=0.1, use_cache=False).numpy())
    np.testing.assert_array_equal(model.generate(PROMPT, 20, temperature=1.5, min_p=1.0).numpy(), greedy)


def test_generate_keeps_the_mode_and_checks_its_arguments():
    model = small_model()
    model.train()
    out = model.generate(ggrad.tensor(PROMPT[:1]), 0)
    np.testing.assert_array_equal(out.numpy(), PROMPT[:1])
    assert model.training
    with pytest.raises(ValueError, match="max_new_tokens"):
        model.generate(PROMPT, -1)
    with pytest.raises(ValueError, match=r"shape \(batch, T\)"):
        model.generate(PROMPT[0], 3)


def test_the_example_samples_text_with_the_cache():
    model = small_model(context=16)
    text = sample(model, "def ", 40, "cpu")
    assert text.startswith("def ") and len(text) == 44
    assert text == sample(model, "def ", 40, "cpu")   # seeded
    assert decode(model.generate(ggrad.tensor([[0]]), 3, temperature=0).numpy()[0])[0] == "\n"


def test_generation_runs_on_quantized_linear_weights():
    model = small_model(context=24)
    for block in model.blocks:
        for linear in (block.fc1, block.fc2, block.attn.out_proj):
            linear.weight = nn.Parameter(ggrad.quantize(linear.weight.detach(), "q8_0"), requires_grad=False)
    assert model.blocks[0].fc1.weight.dtype.name == "q8_0"
    cached = model.generate(PROMPT, 20, temperature=0).numpy()
    np.testing.assert_array_equal(cached, model.generate(PROMPT, 20, temperature=0, use_cache=False).numpy())


@pytest.mark.parametrize("prompt_by_steps", [True, False])
def test_decode_steps_replay_one_recorded_graph(prompt_by_steps, monkeypatch):
    """generate feeds a short prompt (a token at a time through the decode step, or as one graph of its own)
    and then every new token through one decode step recorded once (autograd/step_replay.py): one compute
    per token, no op recorded. The model keeps its KV cache and the recorded steps (nn.generation's
    session), so a later call of the same batch records nothing, even after other computes in between (an
    evaluation: the step keeps its own compute buffer, owned_graph.py)."""
    if not prompt_by_steps:
        monkeypatch.setattr(generation, "PROMPT_BY_STEPS_BYTES", 0)
    model = small_model(context=40)
    plain = model.generate(PROMPT, 30, temperature=0, use_cache=False).numpy()
    keys = ("computes", "step_replays", "cache_hits", "cache_misses")
    steps = (PROMPT.shape[1] if prompt_by_steps else 1) + 29   # the prompt (its tokens or one graph), the new ones
    results = []
    for call in range(3):
        if call == 1:   # an evaluation between two calls: a graph of its own
            with ggrad.no_grad():
                model(ggrad.tensor(PROMPT)).sum().item()
        before = ggrad.stats()
        results.append(model.generate(PROMPT, 30, temperature=0))
        after = ggrad.stats()
        if call == 0:
            np.testing.assert_array_equal(results[0].numpy(), plain)
        delta = {k: after[k] - before[k] for k in keys}
        if call == 0:   # the KV cache's buffers, the first step's inputs and graph recorded
            assert delta["step_replays"] == steps - (1 if prompt_by_steps else 2), delta
            recorded = 1 if prompt_by_steps else 2   # the decode step, and the prompt's graph
            assert delta["computes"] - delta["step_replays"] <= 3 + recorded, delta
            assert delta["cache_hits"] + delta["cache_misses"] <= 2 + 2 * recorded - 1, delta
        else:   # only replays
            assert delta == {"computes": steps, "step_replays": steps, "cache_hits": 0, "cache_misses": 0}, delta
    for result in results[1:]:
        np.testing.assert_array_equal(result.numpy(), plain)


def test_the_kept_decode_session_lets_its_model_go():
    model = small_model(context=40)
    model.generate(PROMPT, 5, temperature=0)
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None


def test_generate_calls_side_by_side_each_decode_their_own_tokens():
    """Two streamed generates interleaved: the second makes its own cache (the model's is taken), and the
    model's weights changed between calls give a new decode step."""
    model = small_model(context=40)
    alone = model.generate(PROMPT, 12, temperature=0).numpy()[:, PROMPT.shape[1]:]
    other = PROMPT[::-1].copy()
    alone_other = model.generate(other, 12, temperature=0).numpy()[:, PROMPT.shape[1]:]
    first, second = model.generate(PROMPT, 12, temperature=0, stream=True), model.generate(other, 12, temperature=0,
                                                                                           stream=True)
    tokens = [(a, b) for a, b in zip(first, second)]
    np.testing.assert_array_equal(np.stack([a for a, _ in tokens], 1), alone)
    np.testing.assert_array_equal(np.stack([b for _, b in tokens], 1), alone_other)
    with ggrad.no_grad():
        model.ln_f.weight.copy_(model.ln_f.weight * 3.0)
    np.testing.assert_array_equal(model.generate(PROMPT, 12, temperature=0).numpy(),
                                  model.generate(PROMPT, 12, temperature=0, use_cache=False).numpy())


@pytest.mark.parametrize("prompt_by_steps", [True, False])
def test_a_left_padded_batch_gives_each_prompt_its_own_tokens(prompt_by_steps, monkeypatch):
    """The prompt through the decode step a token at a time, and as one graph (a model too large for that)."""
    if not prompt_by_steps:
        monkeypatch.setattr(generation, "PROMPT_BY_STEPS_BYTES", 0)
    model = small_model(context=24)
    prompts = [[5, 17, 40], [60, 2, 33, 8, 71], [9]]
    width = max(map(len, prompts))
    ids = np.zeros((3, width), np.int32)
    mask = np.zeros((3, width), np.int32)
    for row, p in enumerate(prompts):
        ids[row, width - len(p):] = p
        mask[row, width - len(p):] = 1
    batched = model.generate(ids, 12, temperature=0, attention_mask=mask).numpy()
    for row, p in enumerate(prompts):
        alone = model.generate(np.array([p], np.int32), 12, temperature=0, use_cache=False).numpy()
        np.testing.assert_array_equal(batched[row, width:], alone[0, len(p):])


def test_stream_yields_the_new_tokens_as_they_are_made():
    model = small_model(context=32)
    whole = model.generate(PROMPT, 15, temperature=0).numpy()
    stream = model.generate(PROMPT, 15, temperature=0, stream=True)
    first = next(stream)   # made before the rest are asked for
    assert first.shape == (2,) and first.dtype == np.int32
    np.testing.assert_array_equal(np.stack([first] + list(stream), axis=1), whole[:, 3:])
    interleaved = []   # other computes between the tokens: the decode step is recorded again, same tokens
    for token in model.generate(PROMPT, 15, temperature=0, stream=True):
        interleaved.append(token)
        assert (ggrad.ones(3) * float(token[0])).sum().item() == 3.0 * token[0]
    np.testing.assert_array_equal(np.stack(interleaved, axis=1), whole[:, 3:])


def test_stop_tokens_end_each_sequence_and_the_generation():
    model = small_model(context=40)
    free = model.generate(PROMPT, 25, temperature=0).numpy()
    stop = int(free[0, 3 + 4])   # row 0's fifth new token
    out = model.generate(PROMPT, 25, temperature=0, eos_token_id=[stop, 95], pad_token_id=0).numpy()
    want = free.copy()
    ends = []
    for row in range(2):
        hits = np.flatnonzero(np.isin(free[row, 3:], [stop, 95]))
        end = 3 + hits[0] + 1 if hits.size else free.shape[1]
        want[row, end:] = 0
        ends.append(end)
    np.testing.assert_array_equal(out, want[:, :max(ends)])
    assert ends[0] <= 3 + 5


def test_sampling_from_a_generator_is_reproducible():
    model = small_model(context=32)
    ggrad.manual_seed(1)
    a = model.generate(PROMPT, 20, top_k=20, generator=ggrad.Generator().manual_seed(3)).numpy()
    b = model.generate(PROMPT, 20, top_k=20, generator=ggrad.Generator().manual_seed(3)).numpy()
    c = model.generate(PROMPT, 20, top_k=20, generator=ggrad.Generator().manual_seed(4)).numpy()
    np.testing.assert_array_equal(a, b)
    assert not (a == c).all()


def test_padding_arguments_are_checked():
    model = small_model(context=16)
    mask = np.array([[0, 1, 1], [1, 1, 1]])
    with pytest.raises(ValueError, match="needs use_cache=True"):
        model.generate(PROMPT, 4, attention_mask=mask, use_cache=False)
    with pytest.raises(ValueError, match="needs use_cache=True"):
        model.generate(PROMPT, 14, attention_mask=mask)
    with pytest.raises(ValueError, match="pad on the left"):
        model.generate(PROMPT, 4, attention_mask=mask[:, ::-1])
    with pytest.raises(ValueError, match="0/1 of the ids' shape"):
        model.generate(PROMPT, 4, attention_mask=mask[:, :2])


def test_repetition_penalty_follows_transformers_with_and_without_the_cache():
    torch = pytest.importorskip("torch")
    processors = pytest.importorskip("transformers.generation.logits_process")
    model = small_model(context=40).eval()
    penalize = processors.RepetitionPenaltyLogitsProcessor(1.8)
    seq = PROMPT.copy()   # transformers' loop: the full forward's last logits, penalised, argmax
    for _ in range(25):
        with ggrad.no_grad():
            logits = model(ggrad.tensor(seq)).numpy()[:, -1]
        nxt = penalize(torch.tensor(seq.astype(np.int64)), torch.tensor(logits)).numpy().argmax(-1)
        seq = np.concatenate([seq, nxt[:, None].astype(np.int32)], axis=1)
    cached = model.generate(PROMPT, 25, temperature=0, repetition_penalty=1.8).numpy()
    np.testing.assert_array_equal(cached, seq)
    np.testing.assert_array_equal(model.generate(PROMPT, 25, temperature=0, repetition_penalty=1.8,
                                                 use_cache=False).numpy(), seq)
    free = model.generate(PROMPT, 25, temperature=0).numpy()
    assert not (free == seq).all()   # the penalty changed the tokens
    # sampled: the same draws with and without the cache; past the context the window slides, the penalty
    # still counts the whole sequence
    for n in (25, 45):
        ggrad.manual_seed(2)
        a = model.generate(PROMPT, n, temperature=0.9, top_k=20, repetition_penalty=1.3).numpy()
        ggrad.manual_seed(2)
        b = model.generate(PROMPT, n, temperature=0.9, top_k=20, repetition_penalty=1.3, use_cache=False).numpy()
        np.testing.assert_array_equal(a, b)
