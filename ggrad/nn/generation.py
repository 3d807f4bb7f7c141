"""Autoregressive decoding: `generate` (greedy, or sampled with temperature, top-k and top-p) over a model
that predicts next-token logits, with or without a KVCache.

The model's side of the contract: `model(ids, kv_cache=None)` gives logits (B, T, V) for int32 ids (B, T)
(with a cache, ids are the T positions after those cached); `model.context` is the longest sequence it
takes; `model.new_kv_cache(batch, static=True)` makes an empty KVCache of `context` positions (static: every
one-token step has the same shapes, so its graph is replayed from the graph cache, not rebuilt; kv_cache.py). Tokens are drawn on the
host from ggrad's seeded generator (`ggrad.manual_seed`), so sampling is reproducible on every device.
"""

import numbers

import numpy as np

from ..autograd import Tensor, no_grad
from ..autograd.factory import generator, tensor


def sample_next(logits, temperature=1.0, top_k=None, top_p=None):
    """Next token ids (B,) drawn from last-position logits (B, V) (a numpy array or a Tensor).

    The logits are divided by `temperature`, then only the `top_k` largest (ties at the k-th kept) and
    the smallest set of most likely tokens whose probabilities reach `top_p` (nucleus sampling; the most
    likely token is always kept) stay candidates. temperature=0 or top_k=1 is greedy (argmax, first of
    ties). Draws one uniform number per row from ggrad's generator.
    """
    _check_sampling(temperature, top_k, top_p)
    z = np.asarray(logits.numpy() if isinstance(logits, Tensor) else logits, dtype=np.float64)
    if z.ndim != 2 or z.shape[1] == 0:
        raise ValueError(f"sample_next: logits must be (batch, vocab), got shape {z.shape}")
    if temperature == 0 or top_k == 1:
        return z.argmax(axis=-1)
    z = z / temperature
    vocab = z.shape[1]
    if top_k is not None and top_k < vocab:
        kth = np.partition(z, vocab - top_k, axis=-1)[:, vocab - top_k:vocab - top_k + 1]
        z = np.where(z < kth, -np.inf, z)
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    if top_p is not None and top_p < 1.0:
        order = np.argsort(-p, axis=-1, kind="stable")
        ranked = np.take_along_axis(p, order, axis=-1)
        keep = np.zeros_like(p, dtype=bool)
        np.put_along_axis(keep, order, np.cumsum(ranked, axis=-1) - ranked < top_p, axis=-1)
        p = np.where(keep, p, 0.0)
    cdf = np.cumsum(p, axis=-1)
    u = generator().random(len(p))[:, None] * cdf[:, -1:]
    return np.minimum((cdf <= u).sum(axis=-1), vocab - 1)   # first token whose cdf exceeds u


def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, use_cache=True):
    """`idx` (B, T) followed by `max_new_tokens` tokens, each predicted from at most `model.context` tokens.

    Each token is predicted from the last `model.context` tokens (longer sequences are cropped, as in
    minGPT). With `use_cache`, the prompt is run once into a KVCache and every further token is one
    step of one position; once the sequence outgrows the context every cached position would move
    (learned absolute positions), so each later token re-runs the cropped window, as without the cache.
    The tokens are the same either way (up to float rounding of near-ties).

    Args:
        model: see the module docstring.
        idx (Tensor | array): int token ids (B, T), T >= 1.
        max_new_tokens (int): tokens to append.
        temperature, top_k, top_p: see `sample_next`.
        use_cache (bool, default True): decode incrementally with a KVCache.

    Returns:
        int32 Tensor (B, T + max_new_tokens) on idx's device (the model's for host data).
    """
    _check_sampling(temperature, top_k, top_p)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral) or max_new_tokens < 0:
        raise ValueError(f"generate: max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
    device = idx.device if isinstance(idx, Tensor) else next(iter(model.parameters())).device
    ids = np.asarray(idx.numpy() if isinstance(idx, Tensor) else idx)
    if ids.ndim != 2 or ids.shape[1] == 0 or (ids.dtype.kind not in "iu"):
        raise ValueError(f"generate: idx must be integer token ids of shape (batch, T) with T >= 1, got "
                         f"{ids.dtype} of shape {ids.shape}")
    context = model.context
    tokens = np.zeros((ids.shape[0], ids.shape[1] + max_new_tokens), dtype=np.int32)
    tokens[:, :ids.shape[1]] = ids
    was_training = model.training
    model.eval()
    try:
        with no_grad():
            cache = model.new_kv_cache(ids.shape[0], static=True) if use_cache else None
            for n in range(ids.shape[1], tokens.shape[1]):
                if cache is not None and n > context:
                    cache = None   # the window slides from here on: every position would change
                start = cache.length if cache is not None else max(0, n - context)
                window = tensor(tokens[:, start:n], device=device)
                logits = model(window, kv_cache=cache) if cache is not None else model(window)
                tokens[:, n] = sample_next(logits[:, -1], temperature, top_k, top_p)
    finally:
        model.train(was_training)
    return tensor(tokens, device=device)


def _check_sampling(temperature, top_k, top_p):
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) or not temperature >= 0:
        raise ValueError(f"generate: temperature must be a number >= 0 (0 = greedy), got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or top_k < 1):
        raise ValueError(f"generate: top_k must be a positive integer or None, got {top_k!r}")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, numbers.Real)
                              or not 0.0 < top_p <= 1.0):
        raise ValueError(f"generate: top_p must be in (0, 1] or None, got {top_p!r}")
