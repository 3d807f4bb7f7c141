"""Quantized weights in the layout of GGML's fast CPU kernels: the CPU backend's `CPU_REPACK` buffer type.

GGML's CPU backend multiplies some quantized types (q4_0, q4_K, iq4_nl, mxfp4 with AVX2; q2_K with
AVX-512; more on ARM) fastest when their blocks are interleaved across 8 rows. It does that re-layout
only for tensors in its "extra" buffer type CPU_REPACK: writing a tensor there repacks it, and a
`mul_mat` (2-D weight first, float32 rows second) reads it with the interleaved kernels. The layout is
one-way: GGML cannot read such a tensor back, and every other op would read it as the file's layout
(wrong values), so a repacked tensor is only ever the weight of a product. `repacked(...)` makes one,
or says (None) that this CPU, type or shape has no such layout.
"""

from ._lib import ffi, lib
from .backend import backend_proc, cpu
from .buffer import Buffer
from .context import Context
from .errors import ShapeError

_EXTRA_BUFTS_SIGNATURE = "ggml_backend_buffer_type_t * (*)(ggml_backend_dev_t)"
_NAME = "CPU_REPACK"
_found = []   # [the buffer type or None], looked up once


def repack_buffer_type():
    """The CPU backend's CPU_REPACK buffer type, or None where this GGML build has none."""
    if not _found:
        buft = None
        get_extra = backend_proc("CPU", "ggml_backend_dev_get_extra_bufts", _EXTRA_BUFTS_SIGNATURE)
        extra = ffi.NULL if get_extra is None else get_extra(cpu().ptr)
        i = 0
        while extra != ffi.NULL and extra[i] != ffi.NULL:
            if ffi.string(lib.ggml_backend_buft_name(extra[i])).decode() == _NAME:
                buft = extra[i]
                break
            i += 1
        _found.append(buft)
    return _found[0]


def is_repacked(buffer_ptr):
    """Whether a `ggml_backend_buffer_t` is a CPU_REPACK buffer (its tensors cannot be read back)."""
    buft = _found[0] if _found else None
    return buft is not None and buffer_ptr != ffi.NULL and lib.ggml_backend_buffer_get_type(buffer_ptr) == buft


class Repacked:
    """A 2-D quantized weight in GGML's CPU_REPACK layout: `tensor` (a GTensor of its own context) in
    `buffer`; both live as long as this object."""

    __slots__ = ("context", "buffer", "tensor")

    def __init__(self, context, buffer, tensor):
        self.context, self.buffer, self.tensor = context, buffer, tensor


def repacked(raw, dtype, ne):
    """The GGML-layout bytes `raw` (uint8) of a 2-D weight of `dtype` and dimensions `ne` (GGML order:
    row length first) written into a CPU_REPACK buffer, or None where GGML's CPU has no interleaved layout
    for this type and shape (or no CPU_REPACK buffer type at all)."""
    buft = repack_buffer_type()
    if buft is None or len(ne) != 2 or not dtype.is_quantized:
        return None
    ctx = Context(n_tensors=1)
    tensor = ctx.new_tensor(dtype, ne)
    if raw.nbytes != tensor.nbytes:
        raise ShapeError(f"repacked: {raw.nbytes} bytes do not hold a {dtype.name} tensor of ne={list(ne)} "
                         f"({tensor.nbytes} bytes)")
    buffer = Buffer(buft, lib.ggml_backend_buft_get_alloc_size(buft, tensor.ptr))
    buffer.place(tensor)   # GGML picks the layout here (tensor->extra), or none for this type and shape
    if tensor.ptr.extra == ffi.NULL:
        return None
    tensor.write(raw)      # repacks: GGML asserts that a picked layout takes the whole tensor (it does)
    return Repacked(ctx, buffer, tensor)
