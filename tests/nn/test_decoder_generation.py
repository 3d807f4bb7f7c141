"""generate over models made of ggrad's layers (nn.GenerationMixin): TransformerEncoder as a decoder-only
stack, TransformerDecoder with a memory, MultiheadAttention; the KV cache changes the cost, not the tokens, and
the tokens are PyTorch's for the same weights."""

import dataclasses

import numpy as np
import pytest

import ggrad
from ggrad import nn
from ggrad.autograd import execution, lowering

VOCAB, D, HEADS, LAYERS, CONTEXT = 37, 32, 4, 2, 40
PROMPT = np.array([[5, 17, 30], [20, 2, 33]], dtype=np.int32)


class DecoderOnly(nn.Module, nn.GenerationMixin):
    """Embeddings, a causal TransformerEncoder (PyTorch's idiom for a GPT), a LayerNorm and an output layer."""

    def __init__(self, batch_first=True, norm_first=True):
        super().__init__()
        self.context, self.batch_first = CONTEXT, batch_first
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(CONTEXT, D)
        layer = nn.TransformerEncoderLayer(D, HEADS, 4 * D, dropout=0.0, batch_first=batch_first,
                                           norm_first=norm_first)
        self.body = nn.TransformerEncoder(layer, LAYERS, norm=nn.LayerNorm(D), enable_nested_tensor=False)
        self.head = nn.Linear(D, VOCAB)

    def forward(self, ids, kv_cache=None):
        t = ids.shape[1]
        pos = kv_cache.position_ids(t, ids.device) if kv_cache is not None else ggrad.arange(t, dtype=ggrad.int32)
        h = self.tok(ids) + self.pos(pos)
        h = h if self.batch_first else h.transpose(0, 1)
        if kv_cache is None:
            h = self.body(h, mask=nn.Transformer.generate_square_subsequent_mask(t), is_causal=True)
        else:
            h = self.body(h, kv_cache=kv_cache)
        return self.head(h if self.batch_first else h.transpose(0, 1))

    def new_kv_cache(self, batch, static=False):
        return nn.KVCache(LAYERS, batch, HEADS, CONTEXT, D // HEADS, device=self.head.weight.device, static=static)


class WithMemory(nn.Module, nn.GenerationMixin):
    """A TransformerDecoder whose memory is a fixed learned sequence (a conditional decoder)."""

    def __init__(self):
        super().__init__()
        self.context = CONTEXT
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(CONTEXT, D)
        self.memory = nn.Parameter(ggrad.randn(1, 6, D))
        layer = nn.TransformerDecoderLayer(D, HEADS, 4 * D, dropout=0.0, batch_first=True)
        self.body = nn.TransformerDecoder(layer, LAYERS)
        self.head = nn.Linear(D, VOCAB)

    def forward(self, ids, kv_cache=None):
        b, t = ids.shape
        pos = kv_cache.position_ids(t, ids.device) if kv_cache is not None else ggrad.arange(t, dtype=ggrad.int32)
        h = self.tok(ids) + self.pos(pos)
        memory = self.memory.expand(b, 6, D)
        if kv_cache is None:
            h = self.body(h, memory, tgt_mask=nn.Transformer.generate_square_subsequent_mask(t), tgt_is_causal=True)
        else:
            h = self.body(h, memory, kv_cache=kv_cache)
        return self.head(h)

    def new_kv_cache(self, batch, static=False):
        return nn.KVCache(LAYERS, batch, HEADS, CONTEXT, D // HEADS, device=self.head.weight.device, static=static)


class AttentionOnly(nn.Module, nn.GenerationMixin):
    """One MultiheadAttention layer with its own residual: the smallest model of the protocol."""

    def __init__(self):
        super().__init__()
        self.context = CONTEXT
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(CONTEXT, D)
        self.attn = nn.MultiheadAttention(D, HEADS, batch_first=True)
        self.head = nn.Linear(D, VOCAB)

    def forward(self, ids, kv_cache=None):
        t = ids.shape[1]
        pos = kv_cache.position_ids(t, ids.device) if kv_cache is not None else ggrad.arange(t, dtype=ggrad.int32)
        h = self.tok(ids) + self.pos(pos)
        if kv_cache is None:
            a = self.attn(h, h, h, attn_mask=nn.Transformer.generate_square_subsequent_mask(t), need_weights=False)[0]
        else:
            a = self.attn(h, is_causal=True, need_weights=False, kv_cache=kv_cache[0])[0]
        return self.head(h + a)

    def new_kv_cache(self, batch, static=False):
        return nn.KVCache(1, batch, HEADS, CONTEXT, D // HEADS, device=self.head.weight.device, static=static)


def scaled(model, seed=0):
    """Random matrices large enough that the greedy tokens vary (no near-ties); norms and biases as made."""
    rng = np.random.default_rng(seed)
    with ggrad.no_grad():
        for p in model.parameters():
            if p.ndim >= 2:
                    p.copy_(ggrad.tensor((rng.standard_normal(p.shape) * 0.5).astype(np.float32)))
    return model.eval()


def torch_twin(model):
    """The same architecture and weights in PyTorch, and its greedy loop over the full forward."""
    torch = pytest.importorskip("torch")
    tnn = torch.nn
    if isinstance(model, DecoderOnly):
        layer = tnn.TransformerEncoderLayer(D, HEADS, 4 * D, dropout=0.0, batch_first=model.batch_first,
                                            norm_first=model.body.layers[0].norm_first)
        body = tnn.TransformerEncoder(layer, LAYERS, norm=tnn.LayerNorm(D), enable_nested_tensor=False)
    else:
        body = tnn.TransformerDecoder(tnn.TransformerDecoderLayer(D, HEADS, 4 * D, dropout=0.0, batch_first=True),
                                      LAYERS)
    twin = tnn.Module()
    twin.tok, twin.pos, twin.body, twin.head = (tnn.Embedding(VOCAB, D), tnn.Embedding(CONTEXT, D), body,
                                                tnn.Linear(D, VOCAB))
    if isinstance(model, WithMemory):
        twin.memory = tnn.Parameter(torch.zeros(1, 6, D))
    twin.load_state_dict({k: torch.tensor(v.numpy()) for k, v in model.state_dict().items()})
    twin.eval()

    def logits(seq):
        ids = torch.tensor(seq.astype(np.int64))
        t = ids.shape[1]
        h = twin.tok(ids) + twin.pos(torch.arange(t))
        mask = tnn.Transformer.generate_square_subsequent_mask(t)
        if isinstance(model, WithMemory):
            h = twin.body(h, twin.memory.expand(len(seq), 6, D), tgt_mask=mask, tgt_is_causal=True)
        else:
            h = h if model.batch_first else h.transpose(0, 1)
            h = twin.body(h, mask=mask, is_causal=True)
            h = h if model.batch_first else h.transpose(0, 1)
        return twin.head(h)[:, -1].detach().numpy()
    return logits


@pytest.mark.parametrize("make", [lambda: DecoderOnly(), lambda: DecoderOnly(batch_first=False, norm_first=False),
                                  WithMemory, AttentionOnly], ids=["pre-norm", "post-norm-seq-first", "memory",
                                                                   "attention"])
def test_cached_tokens_are_the_uncached_tokens(make):
    ggrad.manual_seed(0)
    model = scaled(make())
    cached = model.generate(PROMPT, 25, temperature=0).numpy()
    np.testing.assert_array_equal(cached, model.generate(PROMPT, 25, temperature=0, use_cache=False).numpy())
    assert len(set(cached[0, 3:].tolist())) > 3   # a real sequence, not one repeated token
    ggrad.manual_seed(4)
    a = model.generate(PROMPT, 25, temperature=0.8, top_k=12, repetition_penalty=1.2).numpy()
    ggrad.manual_seed(4)
    b = model.generate(PROMPT, 25, temperature=0.8, top_k=12, repetition_penalty=1.2, use_cache=False).numpy()
    np.testing.assert_array_equal(a, b)
    # two rows sampled: the decode step fed in place (the ids, positions, mask and uniforms of each row)
    rows = np.concatenate([PROMPT, PROMPT[:, ::-1]])
    ggrad.manual_seed(5)
    a = model.generate(rows, 25, temperature=1.5, top_p=0.95).numpy()
    ggrad.manual_seed(5)
    np.testing.assert_array_equal(a, model.generate(rows, 25, temperature=1.5, top_p=0.95, use_cache=False).numpy())
    assert (a[0] != a[1]).any()


@pytest.mark.parametrize("make", [lambda: DecoderOnly(), lambda: DecoderOnly(batch_first=False, norm_first=False),
                                  WithMemory], ids=["pre-norm", "post-norm-seq-first", "memory"])
def test_greedy_tokens_are_pytorchs(make):
    ggrad.manual_seed(0)
    model = scaled(make())
    logits = torch_twin(model)
    seq = PROMPT
    for _ in range(12):
        seq = np.concatenate([seq, logits(seq).argmax(-1)[:, None].astype(np.int32)], axis=1)
    np.testing.assert_array_equal(model.generate(PROMPT, 12, temperature=0).numpy(), seq)


def test_a_left_padded_batch_through_the_decoder_stack():
    ggrad.manual_seed(0)
    model = scaled(DecoderOnly())
    ids = np.array([[0, 0, 5, 17], [20, 2, 33, 8]], dtype=np.int32)
    mask = np.array([[0, 0, 1, 1], [1, 1, 1, 1]], dtype=np.int32)
    batched = model.generate(ids, 10, temperature=0, attention_mask=mask).numpy()
    for row, start in ((0, 2), (1, 0)):
        alone = model.generate(ids[row:row + 1, start:], 10, temperature=0, use_cache=False).numpy()
        np.testing.assert_array_equal(batched[row, 4:], alone[0, 4 - start:])


def test_a_cached_layer_takes_no_mask():
    layer = nn.TransformerDecoderLayer(D, HEADS, dropout=0.0, batch_first=True)
    cache = nn.KVCache(1, 1, HEADS, 8, D // HEADS)
    x, memory = ggrad.randn(1, 2, D), ggrad.randn(1, 3, D)
    with pytest.raises(ValueError, match="with kv_cache the self-attention is causal"):
        layer(x, memory, tgt_mask=nn.Transformer.generate_square_subsequent_mask(2), kv_cache=cache[0])


DECODE_OPS = {"softmax": None, "flash_attn_ext": "FLASH_ATTN_EXT", "kernel": "FLASH_ATTN"}   # the op each computes


def _computed(prof, choice):
    """Whether the profile holds the decode attention op of `choice` and no other's."""
    ops = prof.by_op()
    return all((name in ops) == (c == choice) for c, name in DECODE_OPS.items() if name)


@pytest.mark.parametrize("choice", sorted(DECODE_OPS))
@pytest.mark.parametrize("make", [lambda: DecoderOnly(), AttentionOnly], ids=["stack", "attention"])
def test_decode_attention_either_way_gives_the_same_tokens(choice, make):
    """The lowering's decode_attention (the composed softmax path, GGML's flash_attn_ext or ggrad's kernel):
    the same greedy tokens as the uncached forward, in a left-padded batch too, and the chosen op is the one
    computed."""
    ggrad.manual_seed(0)
    model = scaled(make())
    plain = model.generate(PROMPT, 20, temperature=0, use_cache=False).numpy()
    ids = np.array([[0, 0, 5, 17], [20, 2, 33, 8]], dtype=np.int32)
    mask = np.array([[0, 0, 1, 1], [1, 1, 1, 1]], dtype=np.int32)
    device = ggrad.device("cpu")
    choices = dataclasses.replace(lowering.for_device(device), decode_attention=choice)
    with execution.forced_lowering(device, choices), ggrad.profile() as prof:
        cached = model.generate(PROMPT, 20, temperature=0).numpy()
        padded = model.generate(ids, 10, temperature=0, attention_mask=mask).numpy()
    np.testing.assert_array_equal(cached, plain)
    alone = model.generate(ids[:1, 2:], 10, temperature=0, use_cache=False).numpy()
    np.testing.assert_array_equal(padded[0, 4:], alone[0, 2:])
    assert _computed(prof, choice)


@pytest.mark.parametrize("choice", ["flash_attn_ext", "kernel"])
def test_flash_attention_is_not_taken_with_gradients(choice):
    ggrad.manual_seed(0)
    model = scaled(AttentionOnly())
    device = ggrad.device("cpu")
    choices = dataclasses.replace(lowering.for_device(device), decode_attention=choice)
    with execution.forced_lowering(device, choices), ggrad.profile() as prof:
        cache = model.new_kv_cache(2, static=True)
        model(ggrad.tensor(PROMPT), kv_cache=cache).sum().backward()   # the composed path, differentiable
    assert _computed(prof, "softmax")
    assert model.attn.in_proj_weight.grad is not None


def test_flash_attention_reads_a_float16_cache():
    """flash_attn_ext and ggrad's kernel over f16 keys and values (the queries f32) stay as close to the full
    forward as the composed path over the same cache (the kernel for the one-token steps, flash_attn_ext for
    the two-token prompt)."""
    ggrad.manual_seed(0)
    block = nn.TransformerBlock(16, 4).eval()
    x = np.random.default_rng(0).standard_normal((2, 5, 16)).astype(np.float32)
    device = ggrad.device("cpu")
    outs = {}
    for choice in ("softmax", "flash_attn_ext", "kernel"):
        with execution.forced_lowering(device, dataclasses.replace(lowering.for_device(device),
                                                                   decode_attention=choice)), ggrad.no_grad(), \
                ggrad.profile() as prof:
            cache = nn.KVCache(1, 2, 4, 8, 4, dtype=ggrad.float16, static=True)
            parts = [block(ggrad.tensor(x[:, :2]), kv_cache=cache[0]).numpy()]
            parts += [block(ggrad.tensor(x[:, i:i + 1]), kv_cache=cache[0]).numpy() for i in range(2, 5)]
            outs[choice] = np.concatenate(parts, 1)
        ops = prof.by_op()
        assert ("FLASH_ATTN_EXT" in ops) == (choice != "softmax") and ("FLASH_ATTN" in ops) == (choice == "kernel")
    with ggrad.no_grad():
        full = block(ggrad.tensor(x)).numpy()
    for choice in outs:
        np.testing.assert_allclose(outs[choice], full, atol=5e-3, err_msg=choice)
