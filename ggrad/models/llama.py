"""The llama-family decoder (Llama 2/3, Mistral, Qwen2) as ggrad layers, named as llama.cpp names its tensors.

Its modules carry llama.cpp's GGUF tensor names, so `state_dict()` keys are the file's (`token_embd.weight`,
`blk.0.attn_q.weight`, ...) and every weight keeps the GGML type it was stored in: a quantized one is a frozen
`QuantizedParameter` that the Linear layers multiply on its blocks (GGML's mul_mat) and the embedding reads
by rows (get_rows). Each block: x + attn(RMSNorm(x)), then h + FFN(RMSNorm(h)), FFN = down(silu(gate) * up);
attention with RoPE as llama.cpp computes it (`ModelConfig.rope_mode`, `rope_settings`), grouped-query heads and a
causal mask (narrowed to Mistral's sliding window where the config has one).
The model serves `ggrad.nn.generation.generate` with a KV cache (see `generate`).
"""

import math

import numpy as np

from ..autograd import Parameter
from ..autograd.factory import empty, tensor
from ..autograd.ops.rope import rope
from ..ggml import f32, i32
from ..ggml.errors import ShapeError
from ..nn import Embedding, KVCache, Linear, Module, ModuleList, RMSNorm, generation, init
from ..nn import functional as F
from ..nn.decode_attention import attend_cached, fused_on
from ..nn.functional import MASKED
from ..nn.quantized import QuantizedParameter
from ..utils.checkpoint import checkpoint
from .export import save_gguf


class Weights:
    """Where a model's tensors come from: `loaded` {GGUF name: Tensor} (from_gguf) or, for names it lacks,
    new float32 ones, normal(0, 0.02) for matrices and ones for norms (a model trained from scratch)."""

    def __init__(self, loaded=None, device=None):
        self.loaded, self.device = loaded or {}, device

    def get(self, name, shape, fill="normal"):
        t = self.loaded.get(name)
        if t is None:
            p = Parameter(empty(shape, device=self.device))
            if fill == "normal":
                init.normal_(p, std=0.02)
            elif fill == "ones":
                init.ones_(p)
            else:
                init.zeros_(p)
            return p
        if tuple(t.shape) != tuple(shape):
            raise ShapeError(f"from_gguf: tensor {name} has shape {tuple(t.shape)}; the model's config needs "
                             f"{tuple(shape)}")
        if t.dtype.is_quantized:
            q = QuantizedParameter(t, requires_grad=False)
            q.name, q.layer = name, "GGUF model"
            return q
        return Parameter(t, requires_grad=t.dtype.is_float)

    def linear(self, name, in_features, out_features, bias=False):
        return WeightLinear(self.get(f"{name}.weight", (out_features, in_features)),
                            self.get(f"{name}.bias", (out_features,), "zeros") if bias else None)


class WeightLinear(Linear):
    """nn.Linear made from a given weight (out, in) and bias, of any GGML type (no initialisation)."""

    def __init__(self, weight, bias=None):
        Module.__init__(self)
        self.out_features, self.in_features = weight.shape
        self.weight = weight
        if bias is None:
            self.register_parameter("bias", None)
        else:
            self.bias = bias


class WeightEmbedding(Embedding):
    """nn.Embedding made from a given table (num, dim) of any GGML type (no initialisation)."""

    def __init__(self, weight):
        Module.__init__(self)
        self.num_embeddings, self.embedding_dim = weight.shape
        self.padding_idx = None
        self.weight = weight


def _norm(weights, name, dim, eps):
    norm = RMSNorm(dim, eps=eps, device=weights.device)
    norm.weight = weights.get(f"{name}.weight", (dim,), "ones")
    return norm


class Block(Module):
    """One decoder layer, its tensors named as llama.cpp's `blk.N.*`:
    h = x + attn_output(attention(rope(attn_q(n)), rope(attn_k(n)), attn_v(n))) with n = attn_norm(x), then
    h + ffn_down(silu(ffn_gate(m)) * ffn_up(m)) with m = ffn_norm(h). Grouped-query attention: each key/value
    head serves num_heads / num_kv_heads query heads."""

    def __init__(self, config, weights, prefix):
        super().__init__()
        c = self.config = config
        if c.num_heads % c.num_kv_heads:
            raise ShapeError(f"from_gguf: {c.num_heads} attention heads are not a multiple of the {c.num_kv_heads} "
                             "key/value heads")
        q, kv = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
        self.attn_norm = _norm(weights, f"{prefix}.attn_norm", c.hidden_size, c.norm_eps)
        self.attn_q = weights.linear(f"{prefix}.attn_q", c.hidden_size, q, c.attention_bias)
        self.attn_k = weights.linear(f"{prefix}.attn_k", c.hidden_size, kv, c.attention_bias)
        self.attn_v = weights.linear(f"{prefix}.attn_v", c.hidden_size, kv, c.attention_bias)
        self.attn_output = weights.linear(f"{prefix}.attn_output", q, c.hidden_size)
        self.ffn_norm = _norm(weights, f"{prefix}.ffn_norm", c.hidden_size, c.norm_eps)
        self.ffn_gate = weights.linear(f"{prefix}.ffn_gate", c.hidden_size, c.intermediate_size)
        self.ffn_up = weights.linear(f"{prefix}.ffn_up", c.hidden_size, c.intermediate_size)
        self.ffn_down = weights.linear(f"{prefix}.ffn_down", c.intermediate_size, c.hidden_size)

    def forward(self, x, positions, mask, kv_cache=None, freq_factors=None):
        """x (B, T, hidden); positions int32 (B*T,); mask additive, (B, 1, T, S) or broadcastable to it, or
        already tiled for the grouped query rows by `grouped_mask` (the model does that once for all blocks
        but a cached one-token step's where the device's lowering has a fused decode attention, which takes it
        untiled)."""
        h = x + self.attention(self.attn_norm(x), positions, mask, kv_cache, freq_factors)
        m = self.ffn_norm(h)
        return h + self.ffn_down(F.silu(self.ffn_gate(m)) * self.ffn_up(m))

    def _rotate(self, x, heads, positions, freq_factors):
        b, t = x.shape[0], x.shape[1]
        c = self.config
        x = x.reshape(b * t, heads, c.head_dim)
        x = x if x.dtype is f32 else x.float()
        y = rope(x, positions, c.rotary_dims, c.rope_mode, c.rope_theta, freq_factors, **c.rope_settings())
        return y.reshape(b, t, heads, c.head_dim).permute(0, 2, 1, 3)   # (B, heads, T, D)

    def attention(self, x, positions, mask, kv_cache, freq_factors):
        b, t = x.shape[0], x.shape[1]
        c = self.config
        h, hkv, d = c.num_heads, c.num_kv_heads, c.head_dim
        q = self._rotate(self.attn_q(x), h, positions, freq_factors)
        k = self._rotate(self.attn_k(x), hkv, positions, freq_factors)
        v = self.attn_v(x)
        v = (v if v.dtype is f32 else v.float()).reshape(b, t, hkv, d).permute(0, 2, 1, 3)
        if kv_cache is not None:
            k, v = kv_cache.update(k, v)
            if t == 1 and mask.ndim == 4 and mask.shape[1] == 1:   # a decode step, by the lowering's choice
                out = attend_cached(q, k, v, mask, 1.0 / math.sqrt(d))
                if out is not None:
                    return self.attn_output(out)
        # the `group` query heads of one key/value head as rows of one head: the keys and values are not copied
        q = q.reshape(b, hkv, (h // hkv) * t, d)
        if mask.shape[-2] != q.shape[2]:   # not grouped_mask's yet
            mask = grouped_mask(mask, b, t, c)
        out, _ = F.attend(q, k, v, mask, 1.0 / math.sqrt(d), 0.0, False)
        out = out.reshape(b, h, t, d).permute(0, 2, 1, 3).reshape(b, t, h * d)
        return self.attn_output(out)


def grouped_mask(mask, b, t, config):
    """The additive mask (B or 1, 1, T, S) tiled for the query rows of grouped-query attention: (B, kv heads,
    group * T, S), the `group` query heads of a key/value head one after another (one copy for all blocks)."""
    hkv, group = config.num_kv_heads, config.num_heads // config.num_kv_heads
    s = mask.shape[-1]
    rows = mask.shape[0] if mask.ndim == 4 else 1
    mask = mask.reshape(rows, 1, 1, t, s)
    if group > 1:
        mask = mask.expand(rows, 1, group, t, s)
    return F.fit_mask(mask.reshape(rows, 1, group * t, s), (b, hkv, group * t, s), "llama attention")


class LlamaModel(Module):
    """A llama-family decoder: token_embd, blocks `blk`, output_norm, output (or token_embd when tied).

    Args:
        config (ModelConfig): the hyperparameters.
        weights (Weights, optional): the tensors (default: new float32 weights for training from scratch).
        context (int, optional): the longest sequence `generate` keeps and the KV cache's size (default the
            config's context length, at most 2048).

    `model(ids)` gives float32 logits (B, T, vocab) for integer ids (B, T). `gradient_checkpointing = True`
    recomputes each block in the backward pass (ggrad.utils.checkpoint) instead of keeping its activations.
    """

    def __init__(self, config, weights=None, context=None):
        super().__init__()
        weights = weights or Weights()
        c = self.config = config
        self.context = int(context or min(c.context_length, 2048))
        if self.context <= 0:
            raise ValueError(f"LlamaModel: context must be positive, got {self.context}")
        self.token_embd = WeightEmbedding(weights.get("token_embd.weight", (c.vocab_size, c.hidden_size)))
        self.blk = ModuleList([Block(config, weights, f"blk.{i}") for i in range(c.num_layers)])
        self.output_norm = _norm(weights, "output_norm", c.hidden_size, c.norm_eps)
        if c.tie_word_embeddings:
            self.output = None
        else:
            self.output = weights.linear("output", c.hidden_size, c.vocab_size)
        factors = weights.loaded.get("rope_freqs.weight")
        self.rope_freqs = None if factors is None else _FrequencyFactors(factors, c.rotary_dims)
        self.gradient_checkpointing = False
        self._positions = {}

    def forward(self, ids, kv_cache=None, last_only=False):
        """Logits (B, T, vocab) for token ids (B, T); with `kv_cache` (`new_kv_cache`) the ids are the T
        positions after those cached (a fed cache, `KVCache.feed`, gives the positions and mask).
        `last_only`: the last position's logits only, (B, 1, vocab), skipping the output layer's product for
        the others; a fed cache (generate's decoding, which reads the last position) implies it."""
        if ids.ndim != 2:
            raise ShapeError(f"LlamaModel: ids must be (batch, seq), got shape {tuple(ids.shape)}")
        b, t = ids.shape
        positions, mask = self._positions_and_mask(b, t, kv_cache, ids.device)
        if kv_cache is None or t > 1 or not fused_on(ids.device):   # else a decode step's fused attention
            mask = grouped_mask(mask, b, t, self.config)             # reads it untiled (Block.attention)
        h = self.token_embd(ids if ids.dtype is i32 else ids.to(i32))
        h = h if h.dtype is f32 else h.float()
        factors = None if self.rope_freqs is None else self.rope_freqs.weight
        for i, block in enumerate(self.blk):
            layer_cache = None if kv_cache is None else kv_cache[i]
            if self.gradient_checkpointing and self.training and kv_cache is None:
                h = checkpoint(block, h, positions, mask, None, factors, use_reentrant=False)
            else:
                h = block(h, positions, mask, layer_cache, factors)
        if (last_only or (kv_cache is not None and kv_cache.inputs is not None)) and t > 1:
            h = h[:, -1:]
        h = self.output_norm(h)
        logits = self.output(h) if self.output is not None else F.linear(h, self.token_embd.weight)
        return logits if logits.dtype is f32 else logits.float()

    def _positions_and_mask(self, b, t, kv_cache, device):
        """Position ids (B*T,) int32 and the additive mask (B or 1, 1, T, S) of this forward (with a sliding
        window: keys W or more cache slots before the query blocked too, as transformers' Mistral)."""
        window = self.config.sliding_window
        if kv_cache is not None and kv_cache.inputs is not None:
            inputs = kv_cache.inputs
            mask = inputs.mask
            if window:   # from the fed write slots, in the graph: a replayed step gets each token's own
                s = mask.shape[-1]
                keys_end = tensor(np.arange(window, window + s, dtype=np.float32).reshape(1, s), device=device)
                too_old = inputs.slots.reshape(t, 1).float() >= keys_end     # slot - key >= window
                mask = mask + too_old.float().reshape(1, 1, t, s) * MASKED
            return inputs.positions.reshape(b * t), mask
        start = 0 if kv_cache is None else kv_cache.length
        if kv_cache is not None and start + t > kv_cache.max_len:
            raise ValueError(f"LlamaModel: {start + t} positions ({start} cached) exceed the KV cache's "
                             f"{kv_cache.max_len}")
        key = (b, start, t, None if kv_cache is None else kv_cache.max_len)
        if key not in self._positions:
            pos = np.tile(np.arange(start, start + t, dtype=np.int32), b)
            s = start + t if kv_cache is None else kv_cache.max_len
            mask = F.causal_mask_host(t, s, start)
            if window:
                mask = mask + np.tril(np.full((t, s), MASKED, dtype=np.float32), k=start - window)
            mask = mask.reshape(1, 1, t, s)
            self._positions.clear()   # one entry: the arrays of the last shape
            self._positions[key] = (pos, mask)
        pos, mask = self._positions[key]
        if kv_cache is not None:
            # a growing cache is read through its first start + t positions; a static one through all
            s = kv_cache.max_len if kv_cache[0].static else start + t
            mask = mask[..., :s]
        return tensor(pos, device=device), tensor(np.ascontiguousarray(mask), device=device)

    def new_kv_cache(self, batch, static=False):
        """An empty KVCache for `batch` sequences of up to `context` positions (see nn.KVCache)."""
        c = self.config
        return KVCache(c.num_layers, batch, c.num_kv_heads, self.context, c.head_dim,
                       device=self.token_embd.weight.device, static=static)

    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, use_cache=True, **kwargs):
        """`idx` (B, T) followed by up to `max_new_tokens` tokens: ggrad.nn.generation.generate (the prompt
        one graph, each further token one replay of the recorded decode step); its keyword arguments:
        min_p, attention_mask, eos_token_id, pad_token_id, stream, generator."""
        return generation.generate(self, idx, max_new_tokens, temperature, top_k, top_p, use_cache, **kwargs)

    def save_gguf(self, path, type=None):  # noqa: A002 (the issue's name)
        """Write the model, LoRA adapters merged, as a GGUF file llama.cpp runs (see models.export)."""
        return save_gguf(self, path, type)

    def extra_repr(self):
        c = self.config
        return (f"{c.architecture}: {c.num_layers} layers, hidden {c.hidden_size}, heads {c.num_heads}/"
                f"{c.num_kv_heads}, vocab {c.vocab_size}, context {self.context}")


class _FrequencyFactors(Module):
    """llama.cpp's rope_freqs.weight (Llama 3's RoPE scaling): one divisor per rotated pair."""

    def __init__(self, factors, rotary_dims):
        super().__init__()
        if factors.ndim != 1 or factors.shape[0] < rotary_dims // 2:
            raise ShapeError(f"from_gguf: rope_freqs.weight has shape {tuple(factors.shape)}; RoPE over "
                             f"{rotary_dims} dims needs {rotary_dims // 2} factors")
        self.register_buffer("weight", factors if factors.dtype is f32 else factors.float())

