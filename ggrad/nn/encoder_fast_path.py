"""torch's eval-mode nested-tensor path of TransformerEncoder, as far as its outputs differ: torch turns a
padded batch into a nested tensor (the real tokens only), runs the layers and pads back with zeros, so the
positions that src_key_padding_mask pads come out as 0 (then the final norm, if any, applies to them).
The real tokens are what the padded computation gives (they attend to real keys only), so ggrad computes
padded and zeroes the padded positions whenever torch would take that path:

- at construction (use_nested_tensor): enable_nested_tensor, the layer is a TransformerEncoderLayer with
  norm_first=False, self_attn batch_first, same q/k/v dims and in-projection biases, relu or gelu, equal
  LayerNorm eps, an even head count; otherwise torch warns and never takes the path;
- per call: the first layer in eval mode, a 3-D src, a src_key_padding_mask whose real tokens come first in
  every row (checked when mask_check), no src mask, autocast off, and no gradient being recorded (grad mode
  off, or neither src nor the first layer's weights require grad).
"""

import warnings

import numpy as np

from ..autograd import autocast_hook, grad_mode
from ..autograd.factory import tensor
from . import functional as F
from .activation import GELU, ReLU


def why_no_nested_tensor(layer, is_encoder_layer):
    """torch's reason (a sentence) why an encoder of copies of `layer` (`is_encoder_layer`: a
    TransformerEncoderLayer) never takes the nested path, or ''."""
    attn = getattr(layer, "self_attn", None)
    if not is_encoder_layer:
        return "encoder_layer was not TransformerEncoderLayer"
    if layer.norm_first:
        return "encoder_layer.norm_first was True"
    if not attn.batch_first:
        return ("encoder_layer.self_attn.batch_first was not True(use batch_first for better inference "
                "performance)")
    if not attn._qkv_same_embed_dim:
        return "encoder_layer.self_attn._qkv_same_embed_dim was not True"
    if attn.in_proj_bias is None:
        return "encoder_layer.self_attn was passed bias=False"
    if not (layer.activation in (F.relu, F.gelu) or isinstance(layer.activation, (ReLU, GELU))):
        return "encoder_layer.activation_relu_or_gelu was not True"
    if layer.norm1.eps != layer.norm2.eps:
        return "encoder_layer.norm1.eps was not equal to encoder_layer.norm2.eps"
    if attn.num_heads % 2 == 1:
        return "encoder_layer.self_attn.num_heads is odd"
    return ""


def use_nested_tensor(layer, is_encoder_layer, enable_nested_tensor):
    """Whether the encoder may take the nested path; warns as torch when enabled but impossible."""
    reason = why_no_nested_tensor(layer, is_encoder_layer) if enable_nested_tensor else \
        "enable_nested_tensor was False"
    if enable_nested_tensor and reason:
        warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False because {reason}",
                      stacklevel=3)
    return not reason


def _padding(mask):
    values = mask.numpy() if hasattr(mask, "numpy") else np.asarray(mask)
    return values != 0   # bool True, or a float mask's nonzero bias (-inf), pads


def nested_keep(encoder, src, mask, src_key_padding_mask):
    """A (B, S, 1) float Tensor of 1 at real tokens and 0 at padded ones when torch's nested path applies
    to this call, else None."""
    first = encoder.layers[0]
    if not encoder.use_nested_tensor or first.training or src.ndim != 3 or src_key_padding_mask is None:
        return None
    if mask is not None or autocast_hook.current() is not None:   # an autocast region is active
        return None
    weights = [p for p in first.parameters()]
    if grad_mode.is_grad_enabled() and (src.requires_grad or any(p.requires_grad for p in weights)):
        return None
    keep = ~_padding(src_key_padding_mask)
    if encoder.mask_check and not np.all(keep[:, 1:] <= keep[:, :-1]):   # real tokens first, then padding
        return None
    return tensor(keep.astype(np.float32)[:, :, None], dtype=src.dtype, device=src.device)
