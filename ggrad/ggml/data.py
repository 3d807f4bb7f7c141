"""numpy <-> tensor data on any backend, for every dtype.

f16 maps to numpy float16; bf16 is converted from/to float32; quantized types are quantized from
float32 with `ggml_quantize_chunk` and dequantized with the type's `to_float`. Reads are zero-copy
(`view`) where the tensor lives in host memory and numpy has the type.
"""

import numpy as np

from ._lib import ffi, lib
from . import dtypes
from .backend import check_buffer
from .errors import ArgumentError, DTypeError, GGMLError, ShapeError
from .repack import is_repacked


def _check_allocated(t, what):
    if t.ptr.data == ffi.NULL or t.ptr.buffer == ffi.NULL:
        raise GGMLError(f"{what}: tensor {t.name!r} has no backend memory yet (allocate or compute it first)")
    if is_repacked(t.ptr.buffer):   # GGML has no reader for the layout (a null get_tensor: a crash)
        raise GGMLError(f"{what}: tensor {t.name!r} is in GGML's CPU_REPACK layout, which only mul_mat reads")


def _numpy_shape(t):
    return tuple(reversed(t.ne))


# GGML 0.20.2's codebook quantizers search a grid and abort (GGML_ASSERT) when no distance is finite: on
# nan/inf inputs, and on values or importance weights so large that their squares overflow float32 (seen
# from |x| ~ 1e15, or weights of 1e30). Found by quantizing such inputs in subprocesses; tiny and all-zero
# inputs were fine. Inputs outside these bounds are refused.
_GRID_TYPES = frozenset(("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m"))
_GRID_MAX = 1e6       # largest |value| and importance weight accepted for them


def _check_grid_input(dtype, src, imatrix):
    """Refuse, for the codebook types, the inputs that make GGML's quantizer abort."""
    what = f"quantize to {dtype.name}"
    if not np.isfinite(src).all():
        raise ArgumentError(f"{what}: the input holds nan or inf, which GGML's {dtype.name} quantizer cannot "
                            "encode")
    peak = float(np.abs(src).max()) if src.size else 0.0
    if peak > _GRID_MAX:
        raise ArgumentError(f"{what}: values up to {_GRID_MAX:g} in magnitude are accepted (GGML's grid search "
                            f"overflows beyond), got {peak:g}; rescale the input")
    if imatrix is not None and not (np.isfinite(imatrix).all() and (imatrix >= 0).all()
                                    and (imatrix <= _GRID_MAX).all()):
        raise ArgumentError(f"{what}: imatrix weights must be finite and within [0, {_GRID_MAX:g}]")


def _quantize(src, dtype, imatrix):
    n_per_row = src.shape[-1] if src.ndim else 1
    if n_per_row % dtype.block_size:
        raise ShapeError(f"quantize to {dtype.name}: rows of {n_per_row} values (shape {src.shape}) are not a "
                         f"multiple of {dtype.block_size}, the block size of {dtype.name}")
    if lib.ggml_get_type_traits(dtype.value).to_float == ffi.NULL:
        # q8_1, q8_k: ggml_quantize_chunk has no case for them and would abort
        raise DTypeError(f"quantize to {dtype.name}: GGML uses this type only inside dot products")
    if imatrix is None and lib.ggml_quantize_requires_imatrix(dtype.value):
        raise DTypeError(f"quantize to {dtype.name}: this type needs an importance matrix (imatrix=, one "
                         f"non-negative weight per column)")
    if imatrix is not None:
        imatrix = np.ascontiguousarray(imatrix, dtype=np.float32)
        if imatrix.shape != (n_per_row,):
            raise ShapeError(f"quantize to {dtype.name}: imatrix of shape {imatrix.shape} for rows of {n_per_row}")
    if dtype.name in _GRID_TYPES:
        _check_grid_input(dtype, src, imatrix)
    if src.size == 0:
        return np.empty(0, dtype=np.uint8)
    nrows = src.size // n_per_row
    out = np.empty(dtype.row_size(n_per_row) * nrows, dtype=np.uint8)
    lib.ggml_quantize_init(dtype.value)
    lib.ggml_quantize_chunk(dtype.value, ffi.from_buffer("float *", src), ffi.from_buffer("void *", out),
                            0, nrows, n_per_row, ffi.NULL if imatrix is None else ffi.from_buffer("float *", imatrix))
    return out


def encode(array, dtype, imatrix=None):
    """Bytes of `array` in GGML's layout for `dtype` (conversion and quantization done here).

    `imatrix` (quantized types only): one importance weight per row element, as llama.cpp's imatrix gives.
    """
    dtype = dtypes.as_dtype(dtype)
    array = np.asarray(array)
    if dtype.name == "bf16":
        src = np.ascontiguousarray(array, dtype=np.float32)
        out = np.empty(src.shape, dtype=np.uint16)
        lib.ggml_fp32_to_bf16_row(ffi.from_buffer("float *", src), ffi.from_buffer("ggml_bf16_t *", out), src.size)
        return out
    if dtype.is_quantized:
        return _quantize(np.ascontiguousarray(array, dtype=np.float32), dtype, imatrix)
    if dtype.numpy is None:
        raise DTypeError(f"no numpy conversion to {dtype.name}")
    return np.ascontiguousarray(array, dtype=dtype.numpy)


def decode(raw, dtype, shape):
    """numpy array (float32 for bf16 and quantized) from GGML-layout bytes `raw` (uint8)."""
    dtype = dtypes.as_dtype(dtype)
    n = int(np.prod(shape)) if shape else 1
    raw = np.frombuffer(raw, dtype=np.uint8) if isinstance(raw, (bytes, bytearray, memoryview)) else raw
    if n % dtype.block_size or raw.nbytes != n // dtype.block_size * dtype.type_size:
        raise ShapeError(f"decode {dtype.name}: {raw.nbytes} bytes do not hold shape {tuple(shape)}")
    if dtype.name == "bf16":
        src = np.frombuffer(raw, dtype=np.uint16)
        out = np.empty(n, dtype=np.float32)
        lib.ggml_bf16_to_fp32_row(ffi.from_buffer("ggml_bf16_t *", src), ffi.from_buffer("float *", out), n)
        return out.reshape(shape)
    if dtype.is_quantized:
        traits = lib.ggml_get_type_traits(dtype.value)
        if traits.to_float == ffi.NULL:
            raise DTypeError(f"GGML has no dequantization for {dtype.name}")
        src = np.ascontiguousarray(raw)
        out = np.empty(n, dtype=np.float32)
        traits.to_float(ffi.from_buffer("void *", src), ffi.from_buffer("float *", out), n)
        return out.reshape(shape)
    return np.frombuffer(raw, dtype=dtype.numpy).reshape(shape).copy()


def set_data(t, array):
    """Write `array` (numpy order, same number of elements) into tensor `t`, converting its type."""
    _check_allocated(t, "set_data")
    if not t.is_contiguous:
        raise ShapeError(f"set_data: tensor {t.name!r} is not contiguous")
    array = np.asarray(array)
    if array.size != t.nelements:
        raise ShapeError(f"set_data: array of shape {array.shape} ({array.size} elements) into tensor "
                         f"ne={list(t.ne)} ({t.nelements} elements)")
    raw = encode(array.reshape(_numpy_shape(t)), t.dtype)
    if raw.nbytes != t.nbytes:
        raise ShapeError(f"set_data: {raw.nbytes} bytes for a tensor of {t.nbytes}")
    check_buffer(t.ptr.buffer, "set_data")
    t.write(raw)


def get_data(t, shape=None):
    """A numpy copy of tensor `t` (numpy order; `shape` overrides the 4-D default)."""
    _check_allocated(t, "get_data")
    shape = _numpy_shape(t) if shape is None else tuple(shape)
    if int(np.prod(shape)) != t.nelements:
        raise ShapeError(f"get_data: shape {shape} for a tensor of {t.nelements} elements")
    if not t.is_contiguous:
        raise ShapeError(f"get_data: tensor {t.name!r} is not contiguous")
    return decode(get_raw(t), t.dtype, shape)


def view(t, shape=None, owner=None):
    """A zero-copy numpy view of a host-memory tensor; it keeps `owner` (the tensor's Buffer) alive."""
    _check_allocated(t, "view")
    if not lib.ggml_backend_buffer_is_host(t.ptr.buffer):
        raise DTypeError(f"view: tensor {t.name!r} is in device memory; use get_data")
    dtype = t.dtype
    if dtype.numpy is None or dtype.name == "bf16":
        raise DTypeError(f"view: numpy has no {dtype.name} type; use get_data")
    if not t.is_contiguous:
        raise ShapeError(f"view: tensor {t.name!r} is not contiguous")
    shape = _numpy_shape(t) if shape is None else tuple(shape)
    keeper = (t.ctx, owner)
    holder = ffi.gc(ffi.cast("char *", t.ptr.data), lambda _p, _k=keeper: None)
    return np.frombuffer(ffi.buffer(holder, t.nbytes), dtype=dtype.numpy).reshape(shape)


def host_bytes(t):
    """A zero-copy uint8 view of the bytes of tensor `t` when they are host memory (a CPU backend
    buffer), else None; valid while `t`'s memory is."""
    p = t.ptr
    if p.data == ffi.NULL or p.buffer == ffi.NULL or not lib.ggml_backend_buffer_is_host(p.buffer):
        return None
    n = t.nbytes
    return np.frombuffer(ffi.buffer(ffi.cast("char *", p.data), n), dtype=np.uint8) if n else np.empty(0, np.uint8)


def copy_tensor(src, dst):
    """Copy tensor `src`'s bytes into `dst` (same type and dimensions, packed), whichever backends' memory
    each is in: a device-side copy where both are on one device, a peer copy between two CUDA devices, the
    backends' own get/set otherwise. DeviceLostError where either side is a lost RPC server's (whose
    relay answers zeros)."""
    _check_allocated(src, "copy_tensor")
    _check_allocated(dst, "copy_tensor")
    if src.dtype is not dst.dtype or src.ne != dst.ne or not (src.is_packed and dst.is_packed):
        raise ShapeError(f"copy_tensor: {src.dtype.name} ne={list(src.ne)} into {dst.dtype.name} ne={list(dst.ne)}")
    lib.ggml_backend_tensor_copy(src.ptr, dst.ptr)
    check_buffer(src.ptr.buffer, "copy_tensor")
    check_buffer(dst.ptr.buffer, "copy_tensor")


def get_raw(t):
    """A copy of contiguous tensor `t`'s bytes in GGML's layout (uint8), whatever its type."""
    _check_allocated(t, "get_raw")
    if not t.is_contiguous:
        raise ShapeError(f"get_raw: tensor {t.name!r} is not contiguous")
    raw = np.empty(t.nbytes, dtype=np.uint8)
    if raw.nbytes:
        lib.ggml_backend_tensor_get(t.ptr, ffi.from_buffer("void *", raw), 0, t.nbytes)
        check_buffer(t.ptr.buffer, "get_raw")   # a lost RPC server's relay answers zeros: never return them
    return raw
