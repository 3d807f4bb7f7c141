"""`MultiHeadAttention` (alias `MultiheadAttention`): scaled dot-product attention over several heads.

Self-attention makes q, k and v with ONE matmul against a (3E, E) weight; every head is computed at
once in batched matmuls on (B, H, T, Dh) tensors; all masks are merged into one additive f32 mask
that GGML's fused soft_max_ext applies (blocked = -inf) together with the 1/sqrt(Dh) scale. Self-attention
that returns no weights (a transformer block's) is one recorded op forward and one backward
(`self_attention`, autograd/ops/attention.py).
"""

import math

import numpy as np

from ..autograd.autocast_hook import LOWER, autocast_op
from ..autograd.factory import empty, tensor
from ..autograd.ops.attention import SelfAttention
from ..autograd.roundings import source_of
from ..ggml import f32
from ..ggml.errors import ShapeError
from . import functional as F
from . import init
from .decode_attention import attend_cached
from .linear import Linear
from .module import Module
from .sdpa_kernel import SDPBackend, sdpa_kernel  # noqa: F401  (PyTorch's torch.nn.attention names)
from ..autograd import Parameter


class MultiHeadAttention(Module):
    """Multi-head attention, as PyTorch's `nn.MultiheadAttention`.

    head_h = softmax(Q_h K_h^T / sqrt(Dh) + mask) V_h,  out = concat(head_1..head_H) W_o^T + b_o,
    with Q = query W_q^T + b_q, K = key W_k^T + b_k, V = value W_v^T + b_v and Dh = embed_dim / num_heads.

    Args:
        embed_dim (int): model width E (of the query and of the output).
        num_heads (int): number of heads H; must divide embed_dim.
        dropout (float, default 0.0): dropout on the attention weights (training mode only).
        bias (bool, default True): learn the input and output projection biases.
        batch_first (bool, default False, as PyTorch's): inputs are (T, B, E); True means (B, T, E).
        kdim (int, optional): width of the keys (default embed_dim).
        vdim (int, optional): width of the values (default embed_dim).
        device, dtype (optional): where the parameters live and their dtype.

    Parameters (PyTorch's names, so state dicts carry over): `in_proj_weight` (3E, E) and `in_proj_bias`
    (3E) when kdim == vdim == E, else `q_proj_weight`, `k_proj_weight`, `v_proj_weight` and `in_proj_bias`;
    `out_proj` (a Linear(E, E)).
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, batch_first=False, kdim=None, vdim=None,
                 device=None, dtype=None):
        super().__init__()
        for name, value in (("embed_dim", embed_dim), ("num_heads", num_heads)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"MultiHeadAttention: {name} must be a positive integer, got {value!r}")
        if embed_dim % num_heads:
            raise ValueError(f"MultiHeadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
                             f"({num_heads})")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"MultiHeadAttention: dropout must be in [0, 1], got {dropout}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = float(dropout)
        self.batch_first = batch_first
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        e = embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty(3 * e, e, dtype=dtype, device=device))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(empty(e, e, dtype=dtype, device=device))
            self.k_proj_weight = Parameter(empty(e, self.kdim, dtype=dtype, device=device))
            self.v_proj_weight = Parameter(empty(e, self.vdim, dtype=dtype, device=device))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * e, dtype=dtype, device=device))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(e, e, bias=bias, device=device, dtype=dtype)
        self.reset_parameters()

    def reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    # ---- forward ---------------------------------------------------------------------------------
    def forward(self, query, key=None, value=None, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False, kv_cache=None):
        """Attend from `query` to `key`/`value` (self-attention when they are omitted or the same tensor).

        Args:
            query (Tensor): (B, T, E) ((T, B, E) when batch_first=False; (T, E) unbatched).
            key (Tensor, optional): (B, S, kdim); defaults to query.
            value (Tensor, optional): (B, S, vdim); defaults to key.
            attn_mask (Tensor | array, optional): (T, S), (B*H, T, S) or broadcastable to (B, H, T, S).
                Boolean (bool arrays or int32 Tensors): True/nonzero = NOT allowed to attend (-inf; a
                row with every key blocked is NaN, as PyTorch). Float: added to the scores (a mask
                that requires grad gets its gradient).
            key_padding_mask (Tensor | array, optional): (B, S); boolean True = padding (ignored), or float
                (added).
            is_causal (bool, default False): query i attends only keys j <= i (combined with the masks).
            need_weights (bool, default True, as PyTorch's): also return the attention weights (False
                saves computing their average).
            average_attn_weights (bool, default True): average the returned weights over heads.
            kv_cache (LayerKVCache, optional): incremental self-attention (not in PyTorch's module): this
                call's keys and values are appended to the cache and the query attends to every cached
                position, S = cached + T; `is_causal` then aligns query i with position S - T + i.

        Returns:
            (output (B, T, E), weights (B, T, S) or (B, H, T, S), or None unless need_weights).
        """
        key = query if key is None else key
        value = key if value is None else value
        unbatched = query.ndim == 2
        q_in, k_in, v_in = (_batched(t, unbatched, self.batch_first, name)
                            for t, name in ((query, "query"), (key, "key"), (value, "value")))
        if key is query:
            k_in = q_in
        if value is key:
            v_in = k_in
        if unbatched and key_padding_mask is not None:
            key_padding_mask = _unsqueeze_mask(key_padding_mask)
        self._check_shapes(query, key, value, unbatched)
        b, t = q_in.shape[0], q_in.shape[1]
        if self._one_op(q_in, k_in, v_in, attn_mask, key_padding_mask, need_weights, kv_cache):
            mask = self._merge_masks(attn_mask, key_padding_mask, is_causal, b, t, t, q_in.device)
            causal = is_causal and t > 1 and attn_mask is None and key_padding_mask is None   # the mask is causal's
            qkv = F.linear(q_in, self.in_proj_weight, self.in_proj_bias)
            out, weights = self_attention(qkv, mask, self.num_heads, 1.0 / math.sqrt(self.head_dim), causal), None
        else:
            out, weights = self._attend(q_in, k_in, v_in, attn_mask, key_padding_mask, is_causal, kv_cache,
                                        need_weights)
        out = self.out_proj(out)
        if unbatched:
            out = out.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(dim=1)
        return out, weights.squeeze(0) if unbatched else weights

    def _one_op(self, q_in, k_in, v_in, attn_mask, key_padding_mask, need_weights, kv_cache):
        """Whether this call is self-attention that `self_attention` computes as one recorded op each way:
        one input, one fused projection, no weights returned, no dropout, no cache, constant masks."""
        return (q_in is k_in and k_in is v_in and self._qkv_same_embed_dim and not need_weights
                and kv_cache is None and not (self.dropout and self.training)
                and not getattr(attn_mask, "requires_grad", False)
                and not getattr(key_padding_mask, "requires_grad", False))

    def _attend(self, q_in, k_in, v_in, attn_mask, key_padding_mask, is_causal, kv_cache, need_weights=True):
        """(attention output (B, T, E), weights (B, H, T, S), None unless `need_weights`) on the general path:
        heads as views; a cached decode step by GGML's flash_attn_ext, and without weights or dropout by flash
        attention's kernels, where the lowering says so."""
        b, t = q_in.shape[0], q_in.shape[1]
        q, k, v = self._project(q_in, k_in, v_in)
        if kv_cache is not None:
            if k_in is not q_in or v_in is not q_in:
                raise ValueError("MultiHeadAttention: kv_cache serves self-attention only (key and value omitted "
                                 "or the query itself)")
            k, v = kv_cache.update(k, v)
        s = k.shape[2]
        cached = 0 if kv_cache is None else kv_cache.length - t   # positions before this call's queries
        filled = None if kv_cache is None else kv_cache.key_mask(t, is_causal, q_in.device)   # a static cache's
        mask = self._merge_masks(attn_mask, key_padding_mask, is_causal and filled is None, b, t, s, q_in.device,
                                 cached)
        scale = 1.0 / math.sqrt(self.head_dim)
        if filled is not None and mask is None and not need_weights and not (self.dropout and self.training):
            out = attend_cached(q, k, v, filled, scale)
            if out is not None:
                return out, None
        if filled is not None:
            mask = F.fit_mask(filled if mask is None else mask + filled, (b, self.num_heads, t, s), "MultiHeadAttention")
        out = weights = None
        if not need_weights and not (self.dropout and self.training):
            out = F.attend_by_kernel(q, k, v, mask, scale)
        if out is None:
            out, weights = F.attend(q, k, v, mask, scale, self.dropout, self.training)
        return out.permute(0, 2, 1, 3).reshape(b, t, self.embed_dim), weights   # (B, T, H, Dh) -> (B, T, E)

    def _check_shapes(self, query, key, value, unbatched):
        """The inputs' feature sizes and shared dimensions, checked as the user passed them: errors name the
        shapes and the layout of this module ((L, N, E) unless batch_first, (L, E) unbatched)."""
        e = self.embed_dim
        layout = "(L, E)" if unbatched else "(N, L, E)" if self.batch_first else "(L, N, E)"
        if query.shape[-1] != e:
            raise ShapeError(f"MultiHeadAttention: expected query with embed_dim={e} features, got shape "
                             f"{tuple(query.shape)} {layout}")
        if key.shape[-1] != self.kdim or value.shape[-1] != self.vdim:
            raise ShapeError(f"MultiHeadAttention: expected key with kdim={self.kdim} and value with "
                             f"vdim={self.vdim} features, got shapes {tuple(key.shape)} and {tuple(value.shape)}")
        batch = None if unbatched else 0 if self.batch_first else 1
        sequence = 0 if not self.batch_first or unbatched else 1
        if key.shape[sequence] != value.shape[sequence] or \
                (batch is not None and not query.shape[batch] == key.shape[batch] == value.shape[batch]):
            raise ShapeError(f"MultiHeadAttention: query {tuple(query.shape)}, key {tuple(key.shape)} and value "
                             f"{tuple(value.shape)} (each {layout}) must share the batch size N, and key and value "
                             f"the sequence length")

    def _heads(self, x, n=1):
        """(B, T, n*E) -> (B, n*H, T, Dh): a reshape (a view) and a permute (a view)."""
        b, t = x.shape[0], x.shape[1]
        return x.reshape(b, t, n * self.num_heads, self.head_dim).permute(0, 2, 1, 3)

    def _project(self, query, key, value):
        """q, k, v as (B, H, T|S, Dh)."""
        e, h = self.embed_dim, self.num_heads
        w, bias = self.in_proj_weight, self.in_proj_bias

        def part(start, stop):
            return None if bias is None else bias[start:stop]

        if not self._qkv_same_embed_dim:
            return (self._heads(F.linear(query, self.q_proj_weight, part(0, e))),
                    self._heads(F.linear(key, self.k_proj_weight, part(e, 2 * e))),
                    self._heads(F.linear(value, self.v_proj_weight, part(2 * e, 3 * e))))
        if query is key and key is value:
            qkv = self._heads(F.linear(query, w, bias), 3)                # one matmul: (B, 3H, T, Dh)
            return qkv.split(h, dim=1)                                    # views; backward concatenates
        q = self._heads(F.linear(query, w[:e], part(0, e)))
        if key is value:
            kv = self._heads(F.linear(key, w[e:], part(e, 3 * e)), 2)     # one matmul for k and v
            k, v = kv.split(h, dim=1)
            return q, k, v
        return (q, self._heads(F.linear(key, w[e:2 * e], part(e, 2 * e))),
                self._heads(F.linear(value, w[2 * e:], part(2 * e, 3 * e))))

    def _merge_masks(self, attn_mask, key_padding_mask, is_causal, b, t, s, device, cached=0):
        """One additive f32 mask fitted to the scores (B, H, T, S), or None. Causality: query i sees keys
        j <= i + cached (the single query of a cached step sees them all: no mask)."""
        h = self.num_heads
        parts = []
        if attn_mask is not None:
            m = F.additive_mask(attn_mask, True, "MultiHeadAttention attn_mask", device)
            if m.ndim == 3 and m.shape == (b * h, t, s):
                m = m.reshape(b, h, t, s)
            elif m.ndim not in (2, 4) or m.shape[-2:] != (t, s) or \
                    any(have not in (1, want) for have, want in zip(m.shape[:-2], (b, h))):
                raise F.AttentionMaskError(f"MultiHeadAttention: attn_mask of shape {tuple(m.shape)} should be (L, S) = "
                                 f"{(t, s)}, (N*num_heads, L, S) = {(b * h, t, s)} or broadcastable to "
                                 f"(N, num_heads, L, S) = {(b, h, t, s)}")
            parts.append(m)
        if key_padding_mask is not None:
            m = F.additive_mask(key_padding_mask, True, "MultiHeadAttention key_padding_mask", device)
            if m.shape != (b, s):
                raise F.AttentionMaskError(f"MultiHeadAttention: key_padding_mask of shape {tuple(m.shape)} should be "
                                 f"(N, S) = {(b, s)}")
            parts.append(m.reshape(b, 1, 1, s))
        if is_causal and s > cached + 1:   # else every query sees every key
            parts.append(tensor(F.causal_mask_host(t, s, cached), device=device))
        if not parts:
            return None
        mask = parts[0]
        for extra in parts[1:]:
            mask = mask + extra
        return F.fit_mask(mask, (b, h, t, s), "MultiHeadAttention")

    def extra_repr(self):
        s = f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if not self._qkv_same_embed_dim:
            s += f", kdim={self.kdim}, vdim={self.vdim}"
        if self.in_proj_bias is None:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        return s


class MultiheadAttention(MultiHeadAttention):
    """torch.nn.MultiheadAttention: MultiHeadAttention with torch's rule for `is_causal`, a hint that
    attn_mask is the causal mask. is_causal without attn_mask raises RuntimeError; with no
    key_padding_mask and need_weights=False the causal mask is used in place of attn_mask (as torch's
    fused path does); otherwise attn_mask is used and the hint is ignored. (MultiHeadAttention's
    is_causal applies the causal mask by itself, combined with the others.)"""

    def forward(self, query, key=None, value=None, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False, kv_cache=None):
        if is_causal and kv_cache is None:
            if attn_mask is None:
                raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                                   "module method `generate_square_subsequent_mask` to create this mask.")
            if key_padding_mask is None and not need_weights:
                attn_mask = None
            else:
                is_causal = False
        return super().forward(query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights,
                               is_causal, kv_cache)


@autocast_op("self_attention", LOWER, 1)
def self_attention(qkv, mask, num_heads, scale, causal=False):
    """softmax(q k^T * scale + mask) v over `num_heads` heads of q, k, v side by side in qkv (B, T, 3E), as
    (B, T, E) in qkv's dtype; `mask` None or a constant additive float32 mask fitted to (B, H, T, T);
    `causal`: the mask is exactly the causal one (SelfAttention)."""
    source = None if qkv.dtype is f32 else source_of(qkv)
    if source is not None and source.dtype is f32:   # autocast's rounded product: the gradient to its source
        out = SelfAttention.apply(source, mask, scale, num_heads, qkv, causal)
    else:
        out = SelfAttention.apply(qkv, mask, scale, num_heads, None, causal)
    return out if qkv.dtype is f32 else out.to(qkv.dtype)


def _batched(x, unbatched, batch_first, name):
    if x.ndim != (2 if unbatched else 3):
        raise ShapeError(f"MultiHeadAttention: {name} must be 3-D (batched) or 2-D (unbatched) like the query; got "
                         f"shape {tuple(x.shape)}")
    if unbatched:
        return x.unsqueeze(0)
    return x if batch_first else x.transpose(0, 1)


def _unsqueeze_mask(mask):
    if hasattr(mask, "unsqueeze"):
        return mask.unsqueeze(0)
    return np.asarray(mask)[None]
