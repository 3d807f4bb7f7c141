"""Quantized tensors: `quantize(t, "q8_0")`, `dequantize(t)`, and `x @ w.T` with a quantized `w`.

A quantized Tensor holds GGML's blocks (`dtype` is the GGML type, `shape` the logical one); its rows
(the last dimension) are a whole number of blocks. Quantizing runs on the host through GGML's
`ggml_quantize_chunk` (`ggml.encode`); dequantizing is GGML's cast to f32 in the graph. A matmul with
a quantized weight runs GGML's `mul_mat` on the blocks themselves (or on a copy repacked for the
CPU's kernels, `repacked_weights`); its input gradient multiplies by the weight dequantized in the graph
(`DequantizedRows`: a float copy in the compute buffer for that product; GGML's `out_prod` on quantized
blocks dequantizes every row of the weight once per row of the gradient, and only the CPU runs it).
Quantized tensors are not differentiable (as in PyTorch).
"""

import numpy as np

from ... import ggml
from ...ggml import f32, i32, ops
from ...ggml.errors import DTypeError, ShapeError
from .. import view_tracking
from ..primitive import Primitive
from ..repacked_weights import twin_of
from ..raw import from_raw
from . import views as mv
from ..declaration import declare


def _quantized_dtype(dtype, op):
    dt = ggml.as_dtype(dtype)
    if not dt.is_quantized:
        raise DTypeError(f"{op}: {dt.name} is not a quantized GGML type (e.g. q8_0, q4_0, q4_K)")
    return dt


@declare()
def quantize(t, dtype, imatrix=None):
    """`t` (float, at least 1-D) quantized to the GGML type `dtype` ("q8_0", "q4_K", ...), on t's device.

    Args:
        t: a floating point Tensor; its last dimension must be a multiple of the type's block size.
        dtype: a quantized GGML type, by name (GGML's spelling or lower case) or DType.
        imatrix: optional importance matrix, one non-negative weight per column (shape `(t.shape[-1],)`),
            as llama.cpp's imatrix files hold; required by iq2_xxs, iq2_xs and iq1_s.
    """
    dt = _quantized_dtype(dtype, "quantize")
    if not t.dtype.is_float:
        raise DTypeError(f"quantize: expected a floating point tensor, got {t.dtype.name}")
    if t.ndim == 0 or t.shape[-1] % dt.block_size:
        raise ShapeError(f"quantize: {dt.name} packs each row in blocks of {dt.block_size} values; the last "
                         f"dimension of shape {t.shape} is not a multiple of {dt.block_size}")
    values = t.detach().to(f32).numpy()
    if imatrix is not None:
        imatrix = np.asarray(imatrix.numpy() if hasattr(imatrix, "numpy") else imatrix, dtype=np.float32)
        if imatrix.shape != (t.shape[-1],):
            raise ShapeError(f"quantize: imatrix must have shape ({t.shape[-1]},) (one weight per column of "
                             f"shape {t.shape}), got {imatrix.shape}")
    return from_raw(ggml.encode(values, dt, imatrix=imatrix), dt, t.shape, t.device)


class Dequantize(Primitive):
    """GGML's cast of quantized blocks to float32 (not differentiable: quantized tensors hold no gradient)."""

    @staticmethod
    def build(ctx, graph, t):
        return ops.cast(graph.ctx, t, f32)

    @staticmethod
    def result_dtype(t):
        return f32


@declare(method=True)
def dequantize(t):
    """A float32 copy of quantized `t` (any other tensor: `t.float()`)."""
    if not t.dtype.is_quantized:
        return t.to(f32)
    if view_tracking.blocks_across(t):   # w.T: w dequantized, then viewed
        record = t._view_of
        return view_tracking.derive(Dequantize.apply(record.base), record.steps)
    return Dequantize.apply(t)


class DequantizedRows(Primitive):
    """A 2-D quantized weight as float32, read by GGML's get_rows over all its rows (indices made in the graph):
    the backends run get_rows on more quantized types than the cast (CUDA: the K and IQ types too)."""

    @staticmethod
    def build(ctx, graph, w):
        c = graph.ctx
        rows = ops.cast(c, ops.arange(c, 0.0, float(w.ne[1]), 1.0), i32)   # exact below 2**24 rows
        return ops.get_rows(c, w, rows)

    @staticmethod
    def result_dtype(w):
        return f32


class QuantizedMatMulNT(Primitive):
    """y = x @ w^T for f32 x (M, K) and a quantized w (N, K); gradient to x only."""

    @staticmethod
    def build(ctx, graph, x, w):
        return ops.mul_mat(graph.ctx, w, x)

    saves = (1,)   # backward reads the second argument only

    @staticmethod
    def shape(x, w):
        return (x.shape[0], w.shape[0])

    @staticmethod
    def result_dtype(x, w):
        return f32

    @staticmethod
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        dense = DequantizedRows.apply(w) if w.shape[0] < 2 ** 24 else Dequantize.apply(w)
        return g @ dense, None   # dx = g @ w


class RepackedMatMulNT(QuantizedMatMulNT):
    """QuantizedMatMulNT whose product reads `packed`, w's copy in GGML's CPU_REPACK layout (the same
    values, faster kernels); the gradient to x still reads w."""

    @staticmethod
    def build(ctx, graph, x, w, packed):
        return ops.mul_mat(graph.ctx, packed, x)

    @staticmethod
    def shape(x, w, packed):
        return (x.shape[0], w.shape[0])

    @staticmethod
    def result_dtype(x, w, packed):
        return f32

    @staticmethod
    def backward(ctx, g):
        return QuantizedMatMulNT.backward(ctx, g) + (None,)


def matmul_nt_quantized(x, w):
    """x @ w.T for a 2-D quantized w (N, K) and a float x (..., K): GGML's mul_mat on the quantized blocks."""
    if w.ndim != 2:
        raise ShapeError(f"matmul: a quantized ({w.dtype.name}) operand must be a 2-D weight (N, K), got shape "
                         f"{w.shape}")
    if x.shape[-1] != w.shape[-1]:
        raise ShapeError(f"matmul: shapes {x.shape} and {(w.shape[1], w.shape[0])} don't match (inner dims "
                         f"{x.shape[-1]} != {w.shape[-1]})")
    lead = x.shape[:-1]
    flat = x.to(f32) if x.dtype is not f32 else x
    flat = mv.reshape(flat, -1, x.shape[-1]) if x.ndim != 2 else flat
    packed = twin_of(w)   # a weight kept repacked for the CPU's kernels (repacked_weights.py)
    out = QuantizedMatMulNT.apply(flat, w) if packed is None else RepackedMatMulNT.apply(flat, w, packed)
    return out if x.ndim == 2 else mv.reshape(out, lead + (w.shape[0],))

