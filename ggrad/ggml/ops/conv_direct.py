"""Convolutions GGML computes directly (no im2col buffer), transposed convolutions and col2im."""

from .._lib import lib
from . import _check as C
from ._check import make, tensor
from .conv import _geometry, _out

__all__ = ["conv_transpose_1d", "conv_transpose_2d_p0", "conv_2d_dw_direct", "conv_2d_direct", "conv_3d_direct",
           "col2im_1d"]

_INT32_MAX = 2**31 - 1


def conv_transpose_1d(ctx, a, b, s0, p0, d0):
    """Transposed 1-D convolution: kernel a [K, OC, IC], data b [L, IC] give [(L-1)*s0 + K, OC], f32.

    Args:
        ctx: the Context the result is made in.
        a: f32/f16 kernel [K, OC, IC] with contiguous rows.
        b: f32 data matrix [L, IC] with contiguous rows.
        s0: stride (>= 1).
        p0: padding; GGML supports only 0.
        d0: dilation; GGML supports only 1.
    """
    op = "conv_transpose_1d"
    pa, pb = tensor(op, "a", a), tensor(op, "b", b)
    C.integer(op, "s0", s0, 1, _INT32_MAX)
    if p0 != 0 or d0 != 1:
        raise C.ArgumentError(f"{op}: GGML supports only p0=0 and d0=1, got p0={p0}, d0={d0}")
    na, nb = C.ne(pa), C.ne(pb)
    if nb[2] != 1 or nb[3] != 1 or na[2] != nb[1] or na[3] != 1 or nb[0] < 1 or na[0] < 1:
        C.fail(op, f"kernel a ne={na} and data b ne={nb} don't match (b a matrix, a.ne[2] == b.ne[1], a.ne[3] == 1)")
    C.types(op, "a", pa, C.F32_F16)
    C.types(op, "b", pb, C.ONLY_F32)
    C.contiguous_rows(op, "a", pa)
    C.contiguous_rows(op, "b", pb)
    return make(ctx, op, lib.ggml_conv_transpose_1d, pa, pb, s0, p0, d0)


def conv_transpose_2d_p0(ctx, a, b, stride):
    """Transposed 2-D convolution without padding: kernel a [KW, KH, OC, IC], data b [W, H, IC, N] give
    [(W-1)*stride + KW, (H-1)*stride + KH, OC, N], f32.

    Args:
        ctx: the Context the result is made in.
        a: f32/f16 kernel [KW, KH, OC, IC] with contiguous rows.
        b: f32 data [W, H, IC, N] with contiguous rows.
        stride: the stride in both dimensions (>= 1).
    """
    op = "conv_transpose_2d_p0"
    pa, pb = tensor(op, "a", a), tensor(op, "b", b)
    C.integer(op, "stride", stride, 1, _INT32_MAX)
    if pa.ne[3] != pb.ne[2] or min(pa.ne[0], pa.ne[1], pb.ne[0], pb.ne[1]) < 1:
        C.fail(op, f"kernel a ne={C.ne(pa)} and data b ne={C.ne(pb)} need a.ne[3] == b.ne[2] and non-empty "
                   "spatial dimensions")
    C.types(op, "a", pa, C.F32_F16)
    C.types(op, "b", pb, C.ONLY_F32)
    C.contiguous_rows(op, "a", pa)
    C.contiguous_rows(op, "b", pb)
    return make(ctx, op, lib.ggml_conv_transpose_2d_p0, pa, pb, stride)


def _direct_out(op, pa, pb, geometry):
    for i, (s, p, d) in enumerate(geometry):
        if _out(pb.ne[i], pa.ne[i], s, p, d) <= 0:
            C.fail(op, f"data b ne={C.ne(pb)} is too small for kernel a ne={C.ne(pa)} in dimension {i}")


def conv_2d_dw_direct(ctx, a, b, stride0, stride1, pad0, pad1, dilation0, dilation1):
    """Depthwise 2-D convolution computed directly: kernel a [KW, KH, 1, C], data b [W, H, C, N] give [OW, OH, C, N].

    Args:
        ctx: the Context the result is made in.
        a: f32/f16 kernel [KW, KH, 1, C].
        b: f32 data [W, H, C, N], contiguous (or channels-contiguous, CWHN).
        stride0: stride in width (>= 1).
        stride1: stride in height (>= 1).
        pad0: padding in width (>= 0).
        pad1: padding in height (>= 0).
        dilation0: dilation in width (>= 1).
        dilation1: dilation in height (>= 1).
    """
    op = "conv_2d_dw_direct"
    pa, pb = tensor(op, "a", a), tensor(op, "b", b)
    _geometry(op, [("s0", stride0), ("s1", stride1), ("p0", pad0), ("p1", pad1), ("d0", dilation0), ("d1", dilation1)])
    if pa.ne[2] != 1 or pa.ne[3] != pb.ne[2]:
        C.fail(op, f"kernel a ne={C.ne(pa)} and data b ne={C.ne(pb)} need a.ne[2] == 1 and a.ne[3] == b.ne[2]")
    _direct_out(op, pa, pb, ((stride0, pad0, dilation0), (stride1, pad1, dilation1)))
    C.types(op, "a", pa, C.F32_F16)
    C.types(op, "b", pb, C.ONLY_F32)
    if not lib.ggml_is_contiguous(pb):
        if not lib.ggml_is_contiguous_channels(pb):
            C.fail(op, f"data b (ne={C.ne(pb)}, nb={list(pb.nb)}) must be contiguous or channels-contiguous")
        if not (pa.nb[0] >= pa.nb[2] and pa.nb[1] >= pa.nb[0]):
            C.fail(op, "with channels-contiguous data the kernel must be channels-contiguous too")
    return make(ctx, op, lib.ggml_conv_2d_dw_direct, pa, pb, stride0, stride1, pad0, pad1, dilation0, dilation1)


def conv_2d_direct(ctx, a, b, s0, s1, p0, p1, d0, d1):
    """2-D convolution computed directly (no im2col buffer): a [KW, KH, IC, OC], b [W, H, IC, N] give
    [OW, OH, OC, N] of b's type.

    Args:
        ctx: the Context the result is made in.
        a: contiguous f32/f16 kernel [KW, KH, IC, OC].
        b: f32 data [W, H, IC, N].
        s0: stride in width (>= 1).
        s1: stride in height (>= 1).
        p0: zero padding in width (>= 0).
        p1: zero padding in height (>= 0).
        d0: dilation in width (>= 1).
        d1: dilation in height (>= 1).
    """
    op = "conv_2d_direct"
    pa, pb = tensor(op, "a", a), tensor(op, "b", b)
    _geometry(op, [("s0", s0), ("s1", s1), ("p0", p0), ("p1", p1), ("d0", d0), ("d1", d1)])
    if pa.ne[2] != pb.ne[2]:
        C.fail(op, f"kernel a ne={C.ne(pa)} and data b ne={C.ne(pb)} need the same channels (a.ne[2] == b.ne[2])")
    _direct_out(op, pa, pb, ((s0, p0, d0), (s1, p1, d1)))
    C.types(op, "a", pa, C.F32_F16)
    C.types(op, "b", pb, C.ONLY_F32)
    C.contiguous(op, "a", pa)
    return make(ctx, op, lib.ggml_conv_2d_direct, pa, pb, s0, s1, p0, p1, d0, d1)


def conv_3d_direct(ctx, a, b, s0, s1, s2, p0, p1, p2, d0, d1, d2, n_channels, n_batch, n_channels_out):
    """3-D convolution computed directly: a [KW, KH, KD, IC*OC], b [W, H, D, IC*N] give [OW, OH, OD, OC*N], f32.

    Args:
        ctx: the Context the result is made in.
        a: contiguous f32/f16 kernel [KW, KH, KD, IC*OC].
        b: f32 input [W, H, D, IC*N].
        s0: stride in width.
        s1: stride in height.
        s2: stride in depth.
        p0: padding in width.
        p1: padding in height.
        p2: padding in depth.
        d0: dilation in width.
        d1: dilation in height.
        d2: dilation in depth.
        n_channels: input channels IC.
        n_batch: batch size N.
        n_channels_out: output channels OC.
    """
    op = "conv_3d_direct"
    pa, pb = tensor(op, "a", a), tensor(op, "b", b)
    _geometry(op, [("s0", s0), ("s1", s1), ("s2", s2), ("p0", p0), ("p1", p1), ("p2", p2),
                   ("d0", d0), ("d1", d1), ("d2", d2)])
    for name, v in (("n_channels", n_channels), ("n_batch", n_batch), ("n_channels_out", n_channels_out)):
        C.integer(op, name, v, 1, _INT32_MAX)
    if pa.ne[3] != n_channels * n_channels_out or pb.ne[3] != n_channels * n_batch:
        C.fail(op, f"kernel a ne={C.ne(pa)} and input b ne={C.ne(pb)} need a.ne[3] == n_channels * n_channels_out "
                   f"and b.ne[3] == n_channels * n_batch")
    _direct_out(op, pa, pb, ((s0, p0, d0), (s1, p1, d1), (s2, p2, d2)))
    C.types(op, "a", pa, C.F32_F16)
    C.types(op, "b", pb, C.ONLY_F32)
    C.contiguous(op, "a", pa)
    return make(ctx, op, lib.ggml_conv_3d_direct, pa, pb, s0, s1, s2, p0, p1, p2, d0, d1, d2,
                n_channels, n_batch, n_channels_out)


def col2im_1d(ctx, a, s0, oc, p0):
    """Scatter-add GEMM columns back into a 1-D signal: a [K*OC, T_in] gives [(T_in - 1)*s0 + K - 2*p0, OC].

    Args:
        ctx: the Context the result is made in.
        a: contiguous f32/f16/bf16 matrix [K*OC, T_in].
        s0: stride (>= 1).
        oc: output channels (>= 1, dividing a.ne[0]).
        p0: padding cropped from both sides (>= 0).
    """
    op = "col2im_1d"
    pa = tensor(op, "a", a)
    C.integer(op, "s0", s0, 1, _INT32_MAX)
    C.integer(op, "oc", oc, 1, _INT32_MAX)
    C.integer(op, "p0", p0, 0, _INT32_MAX)
    C.types(op, "a", pa, C.FLOATS)
    C.contiguous(op, "a", pa)
    n = C.ne(pa)
    if n[2] != 1 or n[3] != 1 or n[0] % oc or n[0] < oc or (n[1] - 1) * s0 + n[0] // oc - 2 * p0 <= 0:
        C.fail(op, f"a ne={n} must be a matrix [K*oc, T_in] with oc={oc} dividing ne[0] and a positive output length")
    return make(ctx, op, lib.ggml_col2im_1d, pa, s0, oc, p0)
