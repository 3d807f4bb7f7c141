"""A Tensor's bytes in GGML's own layout, and leaves made from such bytes.

`Tensor.numpy()` converts (bf16 to float32, quantized types dequantized); checkpoints and quantized
weights need the stored bits themselves, so that a save and load round trip is exact for every type.
`from_mapped` makes a CPU leaf over a tensor of a memory-mapped GGUF file (`ggml.mapped`), its bytes read
in place, and `page_out` gives such a leaf's pages back to the kernel.
"""

import numpy as np

from .. import ggml
from ..ggml.mapped import MappedGGUF
from . import memory, view_tracking
from .recording import leaf_bytes
from .tensor import Tensor


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


def from_mapped(mapped, info):
    """A computed leaf Tensor on the CPU over tensor `info` (a gguf.TensorInfo) of MappedGGUF `mapped`: its
    bytes stay in the file's mapping (no copy), which the Tensor keeps alive."""
    node = mapped.tensor(info)
    return Tensor._make(node, info.shape, info.dtype, ggml.cpu(), None, memory.Block(mapped, None))


def page_out(t):
    """Give the kernel back the pages of `t` where `t` is still `from_mapped`'s leaf (a weight read only
    through another copy); True if it did."""
    block = t._block
    if t._pending is not None or block is None or not isinstance(block.buffer, MappedGGUF):
        return False
    return block.buffer.page_out(t._node)
