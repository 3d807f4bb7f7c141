"""`x.view(dtype)`: the bits of x read as another dtype, by PyTorch's rules and in PyTorch's layout.

The bytes reinterpreted are PyTorch's (8 per int64, 1 per bool, int8, uint8, 2 per int16), not the
ones GGML holds them in (torch_dtypes.py), so the values equal PyTorch's for every pair. With the same
element size the shape is kept; otherwise the last dimension grows or shrinks by the size ratio under
PyTorch's conditions (x not 0-d, last stride 1; upsizing: last size, storage offset and other strides
divisible by the ratio), each raising PyTorch's RuntimeError.

Deliberate differences from PyTorch:
- the result is a copy, not a view sharing x's storage: ggrad keeps int64, bool and the small ints in
  wider GGML types, and GGML has no op that reinterprets a node's bits, so the bits go through the host
  (x is computed first). Writes into the result do not reach x, nor writes into x the result.
- float64 is refused (DTypeError), as everywhere in ggrad; an int64 result outside int32's range
  raises IntegerOverflowError, since ggrad holds int64 in 32 bits.
As PyTorch's, the result has no autograd history (view.dtype is not differentiable).
"""

import numpy as np

from . import view_tracking
from .factory import tensor
from .recording import leaf_bytes
from .torch_dtypes import BOOL, INT64, INT8, UINT8, INT16, refuse_float64, resolve
from .. import ggml

# PyTorch's layout of each dtype: the numpy dtype of its bytes (bfloat16 as its uint16 bits)
_LAYOUT = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "i32": np.int32, "i64": np.int64,
           "i8": np.int8, "u8": np.uint8, "i16": np.int16, "bool": np.bool_}
# PyTorch's ScalarType names, as its messages spell them
_TORCH_NAME = {"f32": "Float", "f16": "Half", "bf16": "BFloat16", "i32": "Int", "i64": "Long", "i8": "Char",
               "u8": "Byte", "i16": "Short", "bool": "Bool", "f64": "Double"}
_STORED = (BOOL, INT64, INT8, UINT8, INT16)   # ggrad holds these in another GGML type: uploaded by value


def is_dtype(arg):
    """Whether a lone argument of `view` asks for a dtype view (a dtype object, not a size)."""
    return isinstance(arg, ggml.DType)


def view_dtype(x, dtype):
    """The elements of x reinterpreted as `dtype` (a copy: see the module docstring)."""
    dst = refuse_float64(resolve(dtype), "view")
    src_size, dst_size = _itemsize(x.dtype), _itemsize(dst)
    shape = _shape(x, dst, src_size, dst_size)
    bits = _bits(x).view(_LAYOUT[dst.name]).reshape(shape)
    if dst in _STORED:   # uint8 bytes other than 0 and 1 read as True, as PyTorch prints them
        return tensor(bits != 0 if dst is BOOL else bits, dtype=dst, device=x.device)
    return leaf_bytes(x.device, np.ascontiguousarray(bits).view(np.uint8).reshape(-1), dst, shape)


def _itemsize(dtype):
    return np.dtype(_LAYOUT[dtype.name]).itemsize


def _bits(x):
    """x's values in PyTorch's byte layout, C-contiguous."""
    values = np.ascontiguousarray(x.detach().numpy())
    if x.dtype.name == "bf16":   # GGML widens bf16 to float32 by a 16-bit shift: undo it exactly
        return (values.view(np.uint32) >> 16).astype(np.uint16)
    return values.astype(_LAYOUT[x.dtype.name], copy=False)


def _shape(x, dst, src_size, dst_size):
    """The result's shape, after PyTorch's checks for a change of element size."""
    if src_size == dst_size:
        return x.shape
    what = f"to view {_TORCH_NAME[x.dtype.name]} as {_TORCH_NAME[dst.name]} (different element sizes)"
    if x.ndim == 0:
        raise RuntimeError(f"self.dim() cannot be 0 {what}")
    _, strides, offset = view_tracking.geometry(x)
    if src_size > dst_size:
        if strides[-1] != 1:
            raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {strides[-1]}")
        return x.shape[:-1] + (x.shape[-1] * (src_size // dst_size),)
    ratio = dst_size // src_size
    if x.shape[-1] % ratio:
        raise RuntimeError(f"self.size(-1) must be divisible by {ratio} {what}, but got {x.shape[-1]}")
    if strides[-1] != 1:
        raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {strides[-1]}")
    if offset % ratio:
        raise RuntimeError(f"self.storage_offset() must be divisible by {ratio} {what}, but got {offset}")
    for i, s in enumerate(strides[:-1]):
        if s % ratio:
            raise RuntimeError(f"self.stride({i}) must be divisible by {ratio} {what}, but got {s}")
    return x.shape[:-1] + (x.shape[-1] // ratio,)
