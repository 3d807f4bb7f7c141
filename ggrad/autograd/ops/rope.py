"""Rotary position embedding (RoPE) as GGML's rope_ext, with its backward rope_ext_back.

`rope(x, positions, ...)` rotates the first `n_dims` values of each head of x (tokens, heads, head_dim) by
angles position * freq_base^(-2i/n_dims) (divided by the frequency factors where given, scaled by
freq_scale, with YaRN's options), as llama.cpp does: "normal" mode rotates adjacent pairs (2i, 2i+1) (the
layout of llama.cpp's llama weights), "neox" mode the pairs (i, i + n_dims/2) (transformers' rotate_half).
The rotation is linear in x: its gradient is the inverse rotation (GGML's rope_ext_back).
"""

from ...ggml import f32, i32, ops
from ...ggml.errors import DTypeError, ShapeError
from ..primitive import Primitive

_YARN_DEFAULTS = {"n_ctx_orig": 0, "freq_scale": 1.0, "ext_factor": 0.0, "attn_factor": 1.0, "beta_fast": 32.0,
                  "beta_slow": 1.0}


class Rope(Primitive):
    """x (tokens, heads, head_dim) rotated by GGML's rope_ext; positions i32 (tokens,); `factors` f32 or None."""

    @staticmethod
    def build(ctx, graph, x, positions, factors, settings):
        ctx.settings = settings
        return ops.rope_ext(graph.ctx, x, positions, factors, *settings)

    saves = (1, 2)   # positions, factors

    @staticmethod
    def backward(ctx, g):
        positions, factors = ctx.saved_tensors
        return RopeBack.apply(g, positions, factors, ctx.settings), None, None, None


class RopeBack(Primitive):
    """The inverse rotation of `Rope` (GGML's rope_ext_back); its own gradient is `Rope` again."""

    @staticmethod
    def build(ctx, graph, g, positions, factors, settings):
        ctx.settings = settings
        return ops.rope_ext_back(graph.ctx, g, positions, factors, *settings)

    saves = (1, 2)

    @staticmethod
    def backward(ctx, gg):
        positions, factors = ctx.saved_tensors
        return Rope.apply(gg, positions, factors, ctx.settings), None, None, None


def rope(x, positions, n_dims=None, mode="normal", freq_base=10000.0, freq_factors=None, **yarn):
    """`x` (tokens, heads, head_dim), float32, with its first `n_dims` dims of each head rotated.

    Args:
        x (Tensor): float32 (T, H, D).
        positions (Tensor): int32 (T,), each token's position.
        n_dims (int, optional): dims rotated (even; default D).
        mode (str): "normal" (adjacent pairs, llama.cpp's llama) or "neox" (halves, Qwen2 / GPT-NeoX).
        freq_base (float): base of the rotation frequencies (the model's rope theta).
        freq_factors (Tensor, optional): float32 (>= n_dims/2,) dividing each frequency (Llama 3's scaling).
        **yarn: n_ctx_orig, freq_scale (1 / linear scaling factor), ext_factor, attn_factor, beta_fast,
            beta_slow, as GGML's rope_ext.
    """
    unknown = set(yarn) - set(_YARN_DEFAULTS)
    if unknown:
        raise TypeError(f"rope: unexpected keyword arguments {sorted(unknown)}")
    if x.ndim != 3:
        raise ShapeError(f"rope: x must be (tokens, heads, head_dim), got shape {x.shape}")
    if x.dtype is not f32:
        raise DTypeError(f"rope: x must be float32, got {x.dtype.name}")
    if positions.shape != (x.shape[0],):
        raise ShapeError(f"rope: positions must be ({x.shape[0]},) (one per token of x {x.shape}), got "
                         f"{positions.shape}")
    if positions.dtype is not i32:
        positions = positions.to(i32)
    n_dims = x.shape[2] if n_dims is None else n_dims
    if not 0 < n_dims <= x.shape[2] or n_dims % 2:
        raise ShapeError(f"rope: n_dims={n_dims} must be even and in (0, head_dim={x.shape[2]}]")
    if freq_factors is not None and (freq_factors.ndim != 1 or freq_factors.shape[0] < n_dims // 2):
        raise ShapeError(f"rope: freq_factors must be 1-D with at least n_dims/2 = {n_dims // 2} values, got "
                         f"{freq_factors.shape}")
    if mode not in ("normal", "neox"):
        raise ValueError(f"rope: mode must be 'normal' or 'neox', got {mode!r}")
    s = {**_YARN_DEFAULTS, **yarn}
    settings = (n_dims, mode, int(s["n_ctx_orig"]), float(freq_base), float(s["freq_scale"]),
                float(s["ext_factor"]), float(s["attn_factor"]), float(s["beta_fast"]), float(s["beta_slow"]))
    return Rope.apply(x, positions, freq_factors, settings)
