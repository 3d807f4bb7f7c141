"""A numpy llama/qwen2 forward over GGUF tensors that rounds as GGML's CPU mul_mat does.

GGML's CPU mul_mat converts the activations to the weight type's `vec_dot_type` before the dot products:
f16 for f16 weights, q8_0 blocks (32 values, one f16 scale amax/127, rounded to integers) for q8_0, q4_0,
q5_0; q8_K blocks (256 values, a float32 scale) for the K-quants. Here the activations are rounded the same way (gguf-py's
reference quantizer) and multiplied in float64 by the dequantized weights: what is left against GGML is the
order of float32 sums and ties of the rounding, both far below the rounding this models.
"""

import numpy as np
from gguf import GGMLQuantizationType, quants

_ACTIVATION_TYPE = {"f32": None, "f16": "f16", "q8_0": "q8_0", "q4_0": "q8_0", "q5_0": "q8_0", "q4_k": "q8_K",
                    "q5_k": "q8_K", "q6_k": "q8_K"}


def round_activations(x, weight_type):
    """x (..., K) as the vec_dot type of `weight_type` holds it (float64)."""
    kind = _ACTIVATION_TYPE[weight_type]
    if kind is None:
        return x.astype(np.float64)
    if kind == "f16":
        return x.astype(np.float16).astype(np.float64)
    if kind == "q8_K":   # blocks of 256, a float32 scale: the signed value of largest magnitude maps to -127
        blocks = x.reshape(-1, 256).astype(np.float32)
        top = blocks[np.arange(len(blocks)), np.abs(blocks).argmax(-1)][:, None]
        iscale = np.where(top != 0, np.float32(-127.0) / np.where(top != 0, top, 1), 0).astype(np.float32)
        q = np.minimum(np.rint(blocks * iscale), 127)
        scale = np.where(iscale != 0, 1 / np.where(iscale != 0, iscale, 1), 0).astype(np.float32)
        return (q * scale).reshape(x.shape).astype(np.float64)
    flat = x.reshape(-1, x.shape[-1]).astype(np.float32)
    blocks = quants.quantize(flat, GGMLQuantizationType.Q8_0)
    return quants.dequantize(blocks, GGMLQuantizationType.Q8_0).reshape(x.shape).astype(np.float64)


def _rms_norm(x, w, eps):
    x = x.astype(np.float32)
    return (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)) * w


def _rope(x, positions, base, mode, factors=None):
    """x (T, H, D) rotated: 'normal' adjacent pairs, 'neox' halves."""
    d = x.shape[-1]
    inv = base ** (-np.arange(0, d, 2) / d)
    if factors is not None:
        inv = inv / factors
    angle = positions[:, None, None] * inv[None, None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    if mode == "normal":
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = a * cos - b * sin, a * sin + b * cos
        return out
    a, b = x[..., :d // 2], x[..., d // 2:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def forward(tensors, types, config, ids):
    """Logits (B, T, V) of ids (B, T) for dequantized `tensors` {name: float array}, `types` {name: GGML type
    name} and a ggrad ModelConfig."""
    c = config
    mode = "normal" if c.architecture == "llama" else "neox"
    factors = tensors.get("rope_freqs.weight")

    def linear(x, name):
        y = round_activations(x, types[f"{name}.weight"]) @ tensors[f"{name}.weight"].astype(np.float64).T
        bias = tensors.get(f"{name}.bias")
        return (y if bias is None else y + bias).astype(np.float32)

    b, t = ids.shape
    h = tensors["token_embd.weight"][ids].astype(np.float32)
    positions = np.arange(t, dtype=np.float64)
    causal = np.triu(np.full((t, t), -np.inf), 1)
    heads, kv_heads, d = c.num_heads, c.num_kv_heads, c.head_dim
    for i in range(c.num_layers):
        p = f"blk.{i}"
        n = _rms_norm(h, tensors[f"{p}.attn_norm.weight"], c.norm_eps)
        q = linear(n, f"{p}.attn_q").reshape(b, t, heads, d)
        k = linear(n, f"{p}.attn_k").reshape(b, t, kv_heads, d)
        v = linear(n, f"{p}.attn_v").reshape(b, t, kv_heads, d)
        q = np.stack([_rope(q[j], positions, c.rope_theta, mode, factors) for j in range(b)])
        k = np.stack([_rope(k[j], positions, c.rope_theta, mode, factors) for j in range(b)])
        k = np.repeat(k, heads // kv_heads, axis=2)
        v = np.repeat(v, heads // kv_heads, axis=2)
        scores = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d) + causal
        w = np.exp(scores - scores.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        out = np.einsum("bhqk,bkhd->bqhd", w, v).reshape(b, t, heads * d).astype(np.float32)
        h = h + linear(out, f"{p}.attn_output")
        m = _rms_norm(h, tensors[f"{p}.ffn_norm.weight"], c.norm_eps)
        gate = linear(m, f"{p}.ffn_gate")
        ffn = (gate / (1 + np.exp(-gate))) * linear(m, f"{p}.ffn_up")
        h = h + linear(ffn.astype(np.float32), f"{p}.ffn_down")
    h = _rms_norm(h, tensors["output_norm.weight"], c.norm_eps)
    out_name = "output" if "output.weight" in tensors else "token_embd"
    return linear(h, out_name)
