"""Sizes that fit: a result's element count and byte size are checked before GGML sees its shape.

GGML keeps element counts in int64 and byte counts in size_t and never checks either: a product that
overflows wraps silently, its allocator then hands out a tiny buffer and the compute writes past it (the
process dies), or the result is computed over the wrapped size (silently wrong). PyTorch raises
RuntimeError for both (`numel: integer multiplication overflow`, `Storage size calculation overflowed`);
so does ggrad (ShapeError is a RuntimeError), where the shape is computed: `Primitive` for every result an
op makes (views and expands included: ggrad's expand is a copy), the factories for host data.
"""

import math
import sys

from ..ggml.errors import ShapeError

_INT64_MAX = (1 << 63) - 1
# The most bytes one tensor may take: below size_t by a margin of 2**8, so that GGML's allocator, which adds
# the sizes of a graph's tensors (padded to their alignment) in size_t, cannot wrap either. No address space
# holds as much (x86-64 and AArch64 map at most 2**57 bytes).
MAX_BYTES = sys.maxsize >> 8
# Element counts at or below this fit any type (at most 32 bytes an element), so most shapes need no more.
_ALWAYS_FITS = MAX_BYTES // 32


def check(op, shape, dtype):
    """Raise ShapeError naming `op` and `shape` where a result of `shape` and `dtype` (a ggrad or numpy
    dtype: its `itemsize`, fractional for quantized types) would overflow int64 elements or the bytes a
    tensor may take."""
    numel = math.prod(shape)
    if numel <= _ALWAYS_FITS:
        return
    itemsize = dtype.itemsize
    if numel > _INT64_MAX:
        raise ShapeError(f"{op}: numel: integer multiplication overflow: shape {tuple(shape)} has {numel} "
                         f"elements, more than int64 holds")
    if math.ceil(numel * itemsize) > MAX_BYTES:
        raise ShapeError(f"{op}: storage size calculation overflowed: shape {tuple(shape)} needs "
                         f"{math.ceil(numel * itemsize)} bytes, more than a tensor may take ({MAX_BYTES})")
