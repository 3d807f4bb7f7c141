"""A Tensor's bytes in GGML's own layout, and leaves made from such bytes.

`Tensor.numpy()` converts (bf16 to float32, quantized types dequantized); checkpoints and quantized
weights need the stored bits themselves, so that a save and load round trip is exact for every type.
"""

import numpy as np

from .. import ggml
from . import memory, view_tracking
from .recording import leaf_bytes


def to_raw(t):
    """A uint8 numpy copy of `t`'s GGML-layout bytes (computing `t` first); strided views are copied."""
    t = t.detach()
    if view_tracking.blocks_across(t):
        raise ggml.ShapeError(f"to_raw: a {t.dtype.name} view of shape {t.shape} whose blocks run along another "
                              "dimension (a transposed quantized weight) has no GGML bytes of its own: take its "
                              "base's, or dequantize it")
    if not t.dtype.is_quantized and t.numel() and not t._node.is_contiguous:
        t = t.contiguous()
    t.realize()
    raw = ggml.get_raw(t._node)
    memory.stats.bytes_read += raw.nbytes
    return raw


def from_raw(raw, dtype, shape, device=None):
    """A new leaf Tensor of `dtype` and numpy-order `shape` holding the GGML-layout bytes `raw`."""
    dtype = ggml.as_dtype(dtype)
    dev = ggml.device(device)
    raw = np.ascontiguousarray(raw).view(np.uint8).reshape(-1)
    shape = tuple(int(s) for s in shape)
    return leaf_bytes(dev, raw, dtype, shape)
