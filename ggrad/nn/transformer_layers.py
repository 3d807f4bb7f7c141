"""PyTorch's transformer layers: `TransformerEncoderLayer`, `TransformerDecoderLayer`, the stacks
`TransformerEncoder`, `TransformerDecoder`, and the encoder-decoder `Transformer`.

Built on `MultiheadAttention`, `Linear`, `LayerNorm` and `Dropout` under PyTorch's attribute names
(self_attn, multihead_attn, linear1, linear2, norm1..norm3, layers.{i}, norm), so a state_dict saved
from a torch model loads. (`ggrad.nn.TransformerBlock` is the examples' GPT block, a different layer.)
TransformerEncoder's eval-mode nested-tensor path returns zeros at the positions that src_key_padding_mask
pads, under torch's conditions (encoder_fast_path.py).
"""

import copy

import numpy as np

from ..autograd.factory import tensor
from . import functional as F
from . import init
from .attention import MultiheadAttention
from .containers import ModuleList
from .encoder_fast_path import nested_keep, use_nested_tensor
from .linear import Linear
from .module import Module
from .normalization import Dropout, LayerNorm

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def _activation(activation):
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise RuntimeError(f"activation should be relu/gelu, not {activation}")
        return _ACTIVATIONS[activation]
    if not callable(activation):
        raise TypeError(f"activation should be 'relu', 'gelu' or a callable, got {activation!r}")
    return activation


def _attend(attn, x, kv, mask, padding_mask, is_causal, kv_cache=None):
    """attn(x, kv, kv) with PyTorch's rule for is_causal: a hint that `mask` is the causal mask. With a
    `kv_cache` (a LayerKVCache) self-attention is causal over the cache and takes no mask (a left-padded
    batch's padding is in the cache's key mask: generate's attention_mask)."""
    if kv_cache is not None:
        if mask is not None or padding_mask is not None:
            raise ValueError(f"{type(attn).__name__}: with kv_cache the self-attention is causal over the cache; "
                             "pass no attention mask or key padding mask (left padding goes to generate's "
                             "attention_mask)")
        return attn(x, attn_mask=None, need_weights=False, is_causal=True, kv_cache=kv_cache)[0]
    if is_causal and mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    return attn(x, kv, kv, attn_mask=mask, key_padding_mask=padding_mask, need_weights=False)[0]


class _LayerBase(Module):
    """The feed-forward block and the settings both layers share."""

    def _common(self, d_model, dim_feedforward, dropout, activation, layer_norm_eps, norm_first, bias, factory):
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm_first = norm_first
        self.activation = _activation(activation)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoderLayer(_LayerBase):
    """Self-attention then a feed-forward network, each with a residual connection and LayerNorm.

    post-norm (default): x = norm1(x + SA(x)); x = norm2(x + FF(x))
    pre-norm (norm_first): x = x + SA(norm1(x)); x = x + FF(norm2(x)), FF(x) = linear2(act(linear1(x)))

    Args:
        d_model (int): width of the inputs.
        nhead (int): attention heads.
        dim_feedforward (int, default 2048): hidden width of the feed-forward network.
        dropout (float, default 0.1): dropout on the attention weights, the residual branches and inside FF.
        activation (str or callable, default 'relu'): 'relu', 'gelu' or a function of one tensor.
        layer_norm_eps (float, default 1e-5): the LayerNorms' eps.
        batch_first (bool, default False): tensors are (B, T, E) instead of (T, B, E).
        norm_first (bool, default False): LayerNorm before each block instead of after the residual.
        bias (bool, default True): biases in the Linear and LayerNorm layers and the attention.
        device, dtype (optional): where the parameters live and their dtype.

    forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False, kv_cache=None): masks as
    MultiheadAttention's attn_mask and key_padding_mask; is_causal is a hint that src_mask is the causal mask (it
    needs src_mask). `kv_cache` (a LayerKVCache; not in PyTorch's layer) makes src the next positions of a
    causal decoder (a decoder-only stack: see nn.GenerationMixin); the masks are then None.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            **factory)
        self._common(d_model, dim_feedforward, dropout, activation, layer_norm_eps, norm_first, bias, factory)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False, kv_cache=None):
        x = src
        sa_args = (src_mask, src_key_padding_mask, is_causal, kv_cache)
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), *sa_args)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, *sa_args))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x, mask, padding_mask, is_causal, kv_cache):
        return self.dropout1(_attend(self.self_attn, x, x, mask, padding_mask, is_causal, kv_cache))


class TransformerDecoderLayer(_LayerBase):
    """Self-attention, attention to the encoder's output (memory), then a feed-forward network; each with a
    residual connection and LayerNorm (norm1, norm2, norm3), post-norm or pre-norm as TransformerEncoderLayer.

    Args: as TransformerEncoderLayer.

    forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False, kv_cache=None): `kv_cache` (a
    LayerKVCache; not in PyTorch's layer) makes tgt the next positions, self-attention causal over the cache
    (tgt_mask and tgt_key_padding_mask None); the attention to memory is computed as without it.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            **factory)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, **factory)
        self._common(d_model, dim_feedforward, dropout, activation, layer_norm_eps, norm_first, bias, factory)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout3 = Dropout(dropout)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False, kv_cache=None):
        x = tgt
        self_args = (tgt_mask, tgt_key_padding_mask, tgt_is_causal, kv_cache)
        cross_args = (memory_mask, memory_key_padding_mask, memory_is_causal)
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(_attend(self.self_attn, y, y, *self_args))
            x = x + self.dropout2(_attend(self.multihead_attn, self.norm2(x), memory, *cross_args))
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self.dropout1(_attend(self.self_attn, x, x, *self_args)))
        x = self.norm2(x + self.dropout2(_attend(self.multihead_attn, x, memory, *cross_args)))
        return self.norm3(x + self._ff_block(x))

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


def _clones(layer, n):
    return ModuleList([copy.deepcopy(layer) for _ in range(n)])


class TransformerEncoder(Module):
    """`num_layers` copies of an encoder layer (deep copies: each has its own weights), then `norm`.

    Args:
        encoder_layer (TransformerEncoderLayer): the layer copied.
        num_layers (int): how many.
        norm (Module, optional): applied to the last layer's output.
        enable_nested_tensor (bool, default True): in eval mode without autograd, zero the padded positions
            as torch's nested-tensor path does (encoder_fast_path.py says exactly when).
        mask_check (bool, default True): take that path only when every row's padding comes last.

    forward(src, mask=None, src_key_padding_mask=None, is_causal=None, kv_cache=None): a `KVCache` (not in
    PyTorch's) gives layer i its kv_cache[i] (see TransformerEncoderLayer).
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check
        self.use_nested_tensor = use_nested_tensor(encoder_layer, isinstance(encoder_layer, TransformerEncoderLayer),
                                                   enable_nested_tensor)

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None, kv_cache=None):
        keep = nested_keep(self, src, mask, src_key_padding_mask)
        x = src
        for i, layer in enumerate(self.layers):
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal),
                      kv_cache=None if kv_cache is None else kv_cache[i])
        if keep is not None:
            x = x * keep
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """`num_layers` copies of a decoder layer, then `norm`.

    Args:
        decoder_layer (TransformerDecoderLayer): the layer copied.
        num_layers (int): how many.
        norm (Module, optional): applied to the last layer's output.

    forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False, kv_cache=None): a `KVCache` (not
    in PyTorch's) gives layer i its kv_cache[i] (see TransformerDecoderLayer).
    """

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False, kv_cache=None):
        x = tgt
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal,
                      kv_cache=None if kv_cache is None else kv_cache[i])
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """The encoder-decoder transformer of "Attention Is All You Need", as PyTorch's `nn.Transformer`.

    out = decoder(tgt, encoder(src))

    Args:
        d_model (int, default 512), nhead (int, default 8): width and heads.
        num_encoder_layers, num_decoder_layers (int, default 6): depth of each stack.
        dim_feedforward (int, default 2048), dropout (float, default 0.1), activation (default 'relu'),
        layer_norm_eps (default 1e-5), batch_first (default False), norm_first (default False),
        bias (default True): as TransformerEncoderLayer.
        custom_encoder, custom_decoder (Module, optional): used instead of the stacks built here.
        device, dtype (optional): where the parameters live and their dtype.

    Init: every parameter with 2 or more dims ~ xavier_uniform_, as PyTorch.
    """

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation="relu", custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first, bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(TransformerEncoderLayer(*args, **factory), num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(TransformerDecoderLayer(*args, **factory), num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory))
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        batch = 0 if self.batch_first else 1
        if src.ndim == 3 and tgt.ndim == 3 and src.shape[batch] != tgt.shape[batch]:
            raise RuntimeError(f"the batch number of src and tgt must be equal (src {tuple(src.shape)}, "
                               f"tgt {tuple(tgt.shape)}, batch_first={self.batch_first})")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError(f"the feature number of src and tgt must be equal to d_model ({self.d_model}), got "
                               f"src {tuple(src.shape)} and tgt {tuple(tgt.shape)}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The (sz, sz) float causal mask: -inf above the diagonal, 0 on and below it."""
        mask = np.triu(np.full((sz, sz), -np.inf, dtype=np.float32), k=1)
        return tensor(mask, device=device, dtype=dtype)
