"""`ggrad.nn.functional`: the stateless forms of the layers (PyTorch's `torch.nn.functional`).

Most are the differentiable ops of `ggrad.autograd.ops`; this module adds `embedding` with
`padding_idx`, PyTorch's `rms_norm` default eps, and `scaled_dot_product_attention` (one fused
scaled + masked softmax, GGML's soft_max_ext).
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Sequence

import numpy as np

from ..autograd import Function, Tensor, no_grad
from ..autograd import autocast_hook
from ..autograd.autocast_hook import LOWER, autocast_op
from ..autograd.boundary import guard as _guard
from ..autograd.typing_aliases import ArrayLike
from ..autograd.factory import tensor as _tensor
from ..autograd.ops import (linear, gelu, tanh, sigmoid, softplus,  # noqa: F401
                            softmax, softmax_ext, log_softmax, layer_norm, conv1d, conv2d,
                            cross_entropy, nll_loss, mse_loss, l1_loss, huber_loss,
                            smooth_l1_loss, binary_cross_entropy_with_logits, binary_cross_entropy, kl_div)
from ..autograd.ops import (logsigmoid,  # noqa: F401
                            softsign, tanhshrink, glu, prelu, pad, one_hot, interpolate, conv_transpose1d,
                            hardshrink, softshrink,
                            conv_transpose2d)
from .inplace import (relu, relu6, leaky_relu, elu, selu, celu, silu, mish, hardtanh,  # noqa: F401
                      hardsigmoid, hardswish, threshold, dropout, relu_, elu_, leaky_relu_, hardtanh_, celu_,
                      selu_, threshold_)
from . import inplace as _inplace
from ..autograd.ops import embedding as _embedding, rms_norm as _rms_norm, isneginf as _isneginf
from ..autograd.ops import flash_attention as _flash
from ..autograd.memory import pending_graph as _pending_graph
from ..ggml import f32, i32
from ..ggml.kernels import ATTENTION_HEAD_MAX
from .batch_norm import batch_norm  # noqa: F401  (F.batch_norm; the layers live beside it)
from .group_norm import group_norm, instance_norm, local_response_norm  # noqa: F401
from .pooling import max_pool1d, max_pool2d, avg_pool1d, avg_pool2d  # noqa: F401
from .lp_pool import lp_pool1d, lp_pool2d  # noqa: F401
from .adaptive_pool import adaptive_avg_pool1d, adaptive_avg_pool2d  # noqa: F401
from .dropout_channels import (dropout1d, dropout2d, dropout3d, alpha_dropout,  # noqa: F401
                               feature_alpha_dropout)
from .unpool import max_unpool1d, max_unpool2d  # noqa: F401
from .pooling3d import max_pool3d, avg_pool3d, adaptive_avg_pool3d, adaptive_max_pool3d  # noqa: F401
from .similarity import normalize, cosine_similarity, pairwise_distance  # noqa: F401
from .resampling import pixel_shuffle, pixel_unshuffle, channel_shuffle, upsample  # noqa: F401
from .bilinear import bilinear  # noqa: F401
from .rrelu import rrelu  # noqa: F401
from .grid_sampling import affine_grid, grid_sample  # noqa: F401
from ..autograd.ops.sliding_windows import im2col as unfold, col2im as fold  # noqa: F401  (torch's F.unfold / F.fold)
from .embedding_bag import embedding_bag  # noqa: F401
from .adaptive_max_pool import adaptive_max_pool1d, adaptive_max_pool2d  # noqa: F401
from ..autograd.ops.conv3d import conv3d  # noqa: F401
from ..autograd.ops.conv_transpose3d import conv_transpose3d  # noqa: F401
from ..autograd.ops.ctc import ctc_loss  # noqa: F401
from .margin_losses import (margin_ranking_loss, soft_margin_loss, hinge_embedding_loss,  # noqa: F401
                            cosine_embedding_loss, triplet_margin_loss, multilabel_soft_margin_loss, multi_margin_loss,
                            poisson_nll_loss, gaussian_nll_loss, triplet_margin_with_distance_loss)
from .gumbel_softmax import gumbel_softmax  # noqa: F401
from ..ggml.errors import ArgumentError, ShapeError
from ..autograd.arguments import kinds

__all__ = ["batch_norm", "group_norm", "instance_norm", "local_response_norm", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "linear", "relu", "gelu", "silu", "tanh", "sigmoid", "leaky_relu", "elu", "softplus", "softmax",
           "softmax_ext", "log_softmax", "layer_norm", "rms_norm", "dropout", "embedding", "conv1d", "conv2d",
           "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "lp_pool1d", "lp_pool2d", "scaled_dot_product_attention", "cross_entropy", "nll_loss", "mse_loss",
           "l1_loss", "huber_loss", "smooth_l1_loss", "binary_cross_entropy_with_logits", "binary_cross_entropy",
           "selu", "celu", "logsigmoid", "mish", "hardsigmoid", "hardswish", "hardtanh", "relu6", "softsign",
           "tanhshrink", "glu", "prelu", "pad", "one_hot", "interpolate", "conv_transpose1d", "conv_transpose2d"]
__all__ += [name for name in _inplace.NAMES if name not in __all__]
__all__ += ["dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
            "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d",
            "max_unpool1d", "max_unpool2d", "hardshrink", "softshrink", "softmin", "kl_div", "normalize", "cosine_similarity", "pairwise_distance"]
__all__ += ["pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "upsample", "bilinear", "rrelu", "unfold", "fold",
            "embedding_bag", "adaptive_max_pool1d", "adaptive_max_pool2d", "conv3d", "conv_transpose3d",
            "ctc_loss",
            "margin_ranking_loss", "soft_margin_loss", "hinge_embedding_loss", "cosine_embedding_loss",
            "triplet_margin_loss", "triplet_margin_with_distance_loss", "gumbel_softmax", "grid_sample",
            "affine_grid", "multilabel_soft_margin_loss", "multi_margin_loss", "poisson_nll_loss",
            "gaussian_nll_loss"]

# The causal mask's bias: finite, so it never turns a row into NaN. Boolean masks block with -inf, as PyTorch.
MASKED = -1e30
_BLOCKED = float("-inf")
_F32_EPS = float(np.finfo(np.float32).eps)


def rms_norm(input: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the trailing `normalized_shape` dims.

    eps=None uses float32's machine epsilon, as PyTorch does.
    """
    return _rms_norm(input, normalized_shape, weight, _F32_EPS if eps is None else eps)


# ---- embedding ---------------------------------------------------------------------------------
class _MaskRowGrad(Function):
    """Identity forward; backward zeroes the gradient of the rows looked up at `padding_idx`."""

    @staticmethod
    def forward(ctx, out, index, padding_idx):
        ctx.save_for_backward(index)
        ctx.padding_idx = padding_idx
        return out.detach()

    @staticmethod
    def backward(ctx, g):
        index, = ctx.saved_tensors
        keep = index.ne(ctx.padding_idx).reshape(index.shape + (1,))
        return g * keep, None, None


@kinds(input=None)
def embedding(input: Tensor | ArrayLike, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Rows of `weight` (num_embeddings, dim) at the integer indices `input`: shape input.shape + (dim,).

    Args:
        input (Tensor | array-like of int): indices in [0, num_embeddings).
        weight (Tensor): the table.
        padding_idx (int, optional): lookups of this row pass no gradient to it.
    """
    if not isinstance(input, Tensor):
        array = np.asarray(input)
        if array.dtype.kind not in "iu":
            raise TypeError(f"embedding: indices must be integers, got numpy dtype {array.dtype}")
        n = weight.shape[0]
        if array.size and (array.min() < 0 or array.max() >= n):
            raise IndexError(f"embedding: index out of range: indices span [{array.min()}, {array.max()}] "
                             f"but the table has {n} rows")
        input = _tensor(array, dtype=i32, device=weight.device)
    out = _embedding(input, weight)
    if padding_idx is not None and weight.requires_grad:
        out = _MaskRowGrad.apply(out, input, int(padding_idx) % weight.shape[0])
    return out


# ---- attention ---------------------------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def causal_mask_host(rows, cols, offset=0):
    """The (rows, cols) additive causal mask on the host: MASKED where key j > query i + offset (top-left
    aligned by default; `offset` = cached positions before the queries)."""
    mask = np.triu(np.full((rows, cols), MASKED, dtype=np.float32), k=1 + offset)
    mask.setflags(write=False)
    return mask


class AttentionMaskError(ShapeError, RuntimeError, AssertionError):
    """An attention mask whose shape does not fit the scores. PyTorch raises RuntimeError or AssertionError
    depending on the mask, so this is both (and a ShapeError)."""


def additive_mask(mask, true_masks, op, device=None):
    """A float32 additive mask Tensor from a boolean or float mask.

    Boolean masks are numpy/list bools or integers, or integer Tensors (ggrad's stand-in for bool
    Tensors): with `true_masks`, nonzero entries are blocked (MultiheadAttention's convention), otherwise
    nonzero entries take part (sdpa's). Blocked entries get -inf, so a row with every key blocked is
    NaN, as in PyTorch. Float masks are added as they are and keep their autograd history.
    """
    if isinstance(mask, Tensor):
        if mask.dtype.is_float:
            return mask if mask.dtype is f32 else mask.to(f32)
        with no_grad():
            blocked = mask.ne(0) if true_masks else mask.eq(0)
            zeros = _tensor(np.zeros(mask.shape, dtype=np.float32), device=mask.device)
            return zeros.masked_fill(blocked, _BLOCKED)
    array = np.asarray(mask)
    if array.dtype.kind == "f":
        return _tensor(array.astype(np.float32), device=device)
    if array.dtype.kind not in "biu":
        raise TypeError(f"{op}: a mask must be boolean, integer or float, got numpy dtype {array.dtype}")
    blocked = array.astype(bool) if true_masks else ~array.astype(bool)
    return _tensor(np.where(blocked, np.float32(_BLOCKED), np.float32(0.0)), device=device)


def _may_block_rows(mask):
    """False when `mask` (sdpa's convention) is known on the host to leave every row at least one key."""
    if isinstance(mask, Tensor):
        return True
    array = np.asarray(mask)
    if array.ndim == 0:
        return True
    blocked = np.isneginf(array) if array.dtype.kind == "f" else ~array.astype(bool)
    return bool(blocked.all(axis=-1).any())


def fit_mask(mask, scores_shape, op):
    """`mask` shaped for soft_max_ext against scores (..., L, S): rows expanded to L, no extra dims."""
    *batch, rows, cols = scores_shape
    shape = tuple(mask.shape)
    while len(shape) > len(scores_shape) and shape[0] == 1:
        shape = shape[1:]
    ok = len(shape) <= len(scores_shape) and len(shape) >= 1 and shape[-1] == cols
    if ok:
        for have, want in zip(reversed(shape), reversed(scores_shape)):
            ok = ok and have in (1, want)
    if not ok:
        raise AttentionMaskError(f"{op}: attention mask of shape {tuple(mask.shape)} cannot be broadcast to the attention "
                         f"scores of shape {tuple(scores_shape)} (batch..., L={rows}, S={cols})")
    if shape != tuple(mask.shape):
        mask = mask.reshape(shape)
    if len(shape) < 2 or shape[-2] != rows:
        mask = mask.expand(shape[:-2] + (rows, cols))
    return mask


@autocast_op("attention", LOWER, 3)
def attend(q, k, v, mask=None, scale=None, dropout_p=0.0, training=True, open_rows=None):
    """softmax(q @ k^T * scale + mask) @ v, with dropout on the weights; returns (output, weights).

    q (..., L, E), k (..., S, E), v (..., S, Ev); `mask` an additive f32 Tensor already fitted to
    (..., L, S) by `fit_mask`. The softmax is one fused GGML soft_max_ext; a mask that requires grad is
    added before it instead, so its gradient flows. `open_rows` (..., L, 1), 1 where a row may attend
    and 0 where it may not, zeroes the weights of fully blocked rows (sdpa's rule).
    """
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-1, -2)
    if mask is not None and mask.requires_grad:
        weights = softmax_ext(scores * scale + mask)
    else:
        weights = softmax_ext(scores, mask, scale=scale)
    if open_rows is not None:
        weights = weights * open_rows
    if weights.dtype is not q.dtype and autocast_hook.current() is None:
        weights = weights.to(q.dtype)   # a half model's weights and output are half, as PyTorch's
    if dropout_p > 0.0 and training:
        weights = dropout(weights, dropout_p, True)
    return weights @ v, weights


def _flash_attention(q, k, v, mask, scale, causal):
    """softmax(q @ k^T * scale + mask) @ v by flash attention's kernels (autograd/ops/flash_attention.py) in
    q's dtype, or None where the lowering keeps GGML's ops for these operands. q (..., L, E) of 2 to 4 dims; k
    and v (..., S, .) with q's leading dims but for dim -3, a divisor of q's (grouped-query attention); mask
    None or an additive float32 Tensor fitted to (..., L, S) by fit_mask."""
    if not (_flash.takes(q.device, q.dtype) and 2 <= q.ndim <= 4 and k.dtype is q.dtype and v.dtype is q.dtype
            and max(q.shape[-1], v.shape[-1]) <= ATTENTION_HEAD_MAX):
        return None
    q4, k4, v4 = (t.reshape((1,) * (4 - t.ndim) + t.shape) for t in (q, k, v))
    if q4.shape[0] != k4.shape[0] or q4.shape[1] % k4.shape[1]:
        return None
    if mask is not None:
        if mask.requires_grad or mask.dtype is not f32 or mask.ndim > 4:
            return None
        mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
        if not _flash.mask_fits(mask.shape, q4.shape[1], q4.shape[0]):
            return None
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    out = _flash.FlashAttention.apply(q4, k4, v4, mask, scale, bool(causal)).reshape(q.shape[:-1] + v.shape[-1:])
    return out if out.dtype is q.dtype else out.to(q.dtype)


@autocast_op("attention", LOWER, 3)
def attend_by_kernel(q, k, v, mask=None, scale=None, causal=False):
    """`attend` without weights or dropout by flash attention's kernels (no (..., L, S) tensor forward or
    backward), or None where the lowering keeps GGML's ops (Lowering.attention) or the operands don't fit
    them; `causal`: query i sees keys j <= i only (with or without a mask)."""
    return _flash_attention(q, k, v, mask, scale, causal)


@autocast_op("attention", LOWER, 3)
def _sdpa_by_kernel(query, key, value, attn_mask, scale, is_causal, scores_shape):
    """scaled_dot_product_attention by flash attention's kernels (a row that sees no key gives zeros, as the
    composed path's), or None where they don't take it: its mask is made only where they do."""
    if not _flash.takes(query.device, query.dtype):
        return None
    mask = None
    if attn_mask is not None:
        mask = fit_mask(additive_mask(attn_mask, False, "scaled_dot_product_attention", query.device), scores_shape,
                        "scaled_dot_product_attention")
    return _flash_attention(query, key, value, mask, scale, is_causal)


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | ArrayLike | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False) -> Tensor:
    """softmax(query @ key^T * scale + mask) @ value, as PyTorch's F.scaled_dot_product_attention.

    Args:
        query (Tensor): (..., L, E).
        key (Tensor): (..., S, E).
        value (Tensor): (..., S, Ev).
        attn_mask (Tensor | array, optional): broadcastable to (..., L, S). Boolean (bool arrays or
            int32 Tensors): True/nonzero = takes part in attention. Float: added to the scores (a mask that
            requires grad gets its gradient). A row with no key allowed gives zeros, as PyTorch.
        dropout_p (float, default 0.0): dropout on the attention weights (applied whenever > 0, as in PyTorch).
        is_causal (bool, default False): query i attends keys j <= i; cannot be combined with attn_mask.
        scale (float, optional): defaults to 1 / sqrt(E).
        enable_gqa (bool, default False): grouped-query attention: key and value with fewer heads (dim -3)
            than query, each serving query.shape[-3] // key.shape[-3] query heads.

    Returns:
        Tensor of shape (..., L, Ev).
    """
    if query.ndim < 2 or key.ndim != query.ndim or value.ndim != query.ndim:
        raise ShapeError(f"scaled_dot_product_attention: query, key and value need the same number (>= 2) "
                         f"of dims, got {query.shape}, {key.shape}, {value.shape}")
    if key.shape[-1] != query.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ShapeError(f"scaled_dot_product_attention: query {query.shape}, key {key.shape} and value "
                         f"{value.shape} don't fit (need key.shape[-1] == query.shape[-1] == E and "
                         f"key.shape[-2] == value.shape[-2] == S)")
    grouped = enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]
    if grouped:
        heads, kv_heads = query.shape[-3], key.shape[-3]
        if heads % kv_heads or value.shape[-3] != kv_heads:
            raise RuntimeError(f"scaled_dot_product_attention: with enable_gqa, query's {heads} heads must be a "
                               f"multiple of key's and value's ({kv_heads}, {value.shape[-3]})")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"scaled_dot_product_attention: dropout_p must be in [0, 1], got {dropout_p}")
    if is_causal and attn_mask is not None:
        raise ArgumentError("scaled_dot_product_attention: pass either attn_mask or is_causal=True, not both")
    batch = tuple(max(a, b) for a, b in zip(query.shape[:-2], key.shape[:-2]))
    if grouped:
        batch = query.shape[:-2]
    scores_shape = batch + (query.shape[-2], key.shape[-2])
    if dropout_p == 0.0 and _flash.may_take(_pending_graph(query.device)):
        out = _sdpa_by_kernel(query, key, value, attn_mask, scale, is_causal, scores_shape)
        if out is not None:
            return out
    if grouped:
        key = key.repeat_interleave(heads // kv_heads, dim=-3)
        value = value.repeat_interleave(heads // kv_heads, dim=-3)
    mask = open_rows = None
    if is_causal:
        mask = _tensor(causal_mask_host(query.shape[-2], key.shape[-2]), device=query.device)
    elif attn_mask is not None:
        mask = additive_mask(attn_mask, False, "scaled_dot_product_attention", query.device)
    if mask is not None:
        mask = fit_mask(mask, scores_shape, "scaled_dot_product_attention")
    if attn_mask is not None and _may_block_rows(attn_mask):
        with no_grad():
            blocked = _isneginf(mask).sum(-1, keepdim=True).eq(mask.shape[-1])
        open_rows = 1.0 - blocked.float()
        mask = mask.masked_fill(blocked, 0.0)   # a finite row: no NaN forward or backward
    out, _ = attend(query, key, value, mask, scale, dropout_p, True, open_rows)
    return out


def softmin(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:  # noqa: A002
    """softmax(-input) along `dim`: the smallest entries weigh most. Without dim, PyTorch's deprecated
    implicit choice (0 for 0-D, 1-D and 3-D inputs, else 1), with its warning."""
    if dim is None:
        warnings.warn("Implicit dimension choice for softmin has been deprecated. Change the call to include "
                      "dim=X as an argument.", UserWarning, stacklevel=2)
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return softmax(-input, dim, dtype)


_guard(globals(), __all__)   # a non-Tensor input raises TypeError naming the op, as PyTorch
