"""im2col and the convolutions GGML builds from it (im2col + mul_mat).

GGML builds several convolutions (conv_1d, conv_2d, conv_2d_dw, conv_3d, ...) from im2col, reshapes
and mul_mat. Their builders replay that recipe with ggrad's own validated builders in a scratch
metadata context first, so every rule of every step is checked, and then call GGML's composite.
"""

from .._lib import lib
from .. import errors
from . import _check as C
from ._check import make, tensor
from . import linalg, shape

__all__ = ["im2col", "im2col_3d", "conv_1d", "conv_1d_ph", "conv_1d_dw", "conv_1d_dw_ph", "conv_2d", "conv_2d_sk_p0",
           "conv_2d_s1_ph", "conv_2d_dw", "conv_3d"]

_INT32_MAX = 2**31 - 1


def _out(ins, k, s, p, d):
    return (ins + 2 * p - d * (k - 1) - 1) // s + 1 if ins + 2 * p - d * (k - 1) - 1 >= 0 else 0


def _geometry(op, names_values):
    """Strides and dilations >= 1, paddings >= 0."""
    for name, v in names_values:
        C.integer(op, name, v, 0 if name[0] == "p" else 1, _INT32_MAX)


def _replay(op, recipe, *args):
    """Run `recipe(scratch_ctx, *args)` built from validated builders; re-raise its errors as `op`'s."""
    p = C.scratch()
    try:
        recipe(p, *args)
    except (errors.ShapeError, errors.DTypeError, C.ArgumentError) as exc:
        raise type(exc)(f"{op}: {exc}") from None
    finally:
        lib.ggml_reset(p.ptr)


def _im2col_type(a):
    return C.F32 if a.ptr.type == C.BF16 else C.F16


def _kernel(op, a):
    pa = tensor(op, "a", a)
    C.types(op, "a", pa, C.F32_F16)  # the kernel becomes mul_mat's second operand against f16 columns
    return pa


# ----------------------------------------------------------------------------------------------------
# im2col

def im2col(ctx, a, b, s0, s1, p0, p1, d0, d1, is_2D, dst_type):
    """Unfold `b` into the columns a convolution with kernel shape `a` reads (conv = im2col + mul_mat).

    1-D: a [K, IC, OC], b [L, IC, N] give [IC*K, OL, N]. 2-D: a [KW, KH, IC, OC], b [W, H, IC, N] give
    [IC*KH*KW, OW, OH, N].

    Args:
        ctx: the Context the result is made in.
        a: the kernel (only its shape is used).
        b: the data (f32, or f16 with dst_type f16) with contiguous rows.
        s0: stride in dimension 0 (>= 1).
        s1: stride in dimension 1 (2-D only; >= 1).
        p0: zero padding in dimension 0 (>= 0).
        p1: zero padding in dimension 1 (2-D only).
        d0: dilation in dimension 0 (>= 1).
        d1: dilation in dimension 1 (2-D only; >= 1).
        is_2D: True for a 2-D unfold.
        dst_type: the result's dtype, f16 or f32.
    """
    op = "im2col"
    pa, pb = tensor(op, "a", a), tensor(op, "b", b)
    is_2D = bool(is_2D)
    _geometry(op, [("s0", s0), ("p0", p0), ("d0", d0)] + ([("s1", s1), ("p1", p1), ("d1", d1)] if is_2D else []))
    tv = C.dtype(op, "dst_type", dst_type)
    na, nb = C.ne(pa), C.ne(pb)
    if is_2D:
        if na[2] != nb[2]:
            C.fail(op, f"kernel a ne={na} and data b ne={nb} need the same channels (a.ne[2] == b.ne[2])")
        if _out(nb[1], na[1], s1, p1, d1) <= 0:
            C.fail(op, f"data b ne={nb} is too small for kernel a ne={na} in dimension 1")
    elif nb[1] != na[1] or nb[3] != 1:
        C.fail(op, f"1-D: kernel a ne={na} and data b ne={nb} need b.ne[1] == a.ne[1] and b.ne[3] == 1")
    if _out(nb[0], na[0], s0, p0, d0) <= 0:
        C.fail(op, f"data b ne={nb} is too small for kernel a ne={na} in dimension 0")
    if tv not in C.F32_F16:
        raise C.DTypeError(f"{op}: dst_type must be f32 or f16, got {C.tname(tv)}")
    C.types(op, "b", pb, C.ONLY_F32 if tv == C.F32 else C.F32_F16)
    C.contiguous_rows(op, "b", pb)
    return make(ctx, op, lib.ggml_im2col, pa, pb, s0, s1, p0, p1, d0, d1, is_2D, tv)


def im2col_3d(ctx, a, b, IC, s0, s1, s2, p0, p1, p2, d0, d1, d2, dst_type):
    """3-D unfold: a [KW, KH, KD, OC*IC] and b [W, H, D, N*IC] give [IC*KD*KH*KW, OW, OH, OD*N].

    Args:
        ctx: the Context the result is made in.
        a: the kernel (only its shape is used).
        b: f32 data [W, H, D, N*IC].
        IC: input channels (>= 1, dividing b.ne[3]).
        s0: stride in width.
        s1: stride in height.
        s2: stride in depth.
        p0: padding in width.
        p1: padding in height.
        p2: padding in depth.
        d0: dilation in width.
        d1: dilation in height.
        d2: dilation in depth.
        dst_type: the result's dtype, f16 or f32.
    """
    op = "im2col_3d"
    pa, pb = tensor(op, "a", a), tensor(op, "b", b)
    C.integer(op, "IC", IC, 1)
    _geometry(op, [("s0", s0), ("s1", s1), ("s2", s2), ("p0", p0), ("p1", p1), ("p2", p2),
                   ("d0", d0), ("d1", d1), ("d2", d2)])
    tv = C.dtype(op, "dst_type", dst_type)
    na, nb = C.ne(pa), C.ne(pb)
    if nb[3] % IC or nb[3] < IC:
        C.fail(op, f"data b ne={nb}: b.ne[3] must be a positive multiple of IC={IC}")
    for i, (s, p, d) in enumerate(((s0, p0, d0), (s1, p1, d1), (s2, p2, d2))):
        if _out(nb[i], na[i], s, p, d) <= 0:
            C.fail(op, f"data b ne={nb} is too small for kernel a ne={na} in dimension {i}")
    if tv not in C.F32_F16:
        raise C.DTypeError(f"{op}: dst_type must be f32 or f16, got {C.tname(tv)}")
    C.types(op, "b", pb, C.ONLY_F32)
    return make(ctx, op, lib.ggml_im2col_3d, pa, pb, IC, s0, s1, s2, p0, p1, p2, d0, d1, d2, tv)


# ----------------------------------------------------------------------------------------------------
# convolutions built from im2col + mul_mat (replayed with our builders first)

def _conv_1d_recipe(P, a, b, s0, p0, d0):
    im = im2col(P, a, b, s0, 0, p0, 0, d0, 0, False, _im2col_type(a))
    n, na = im.ne, a.ne
    r = linalg.mul_mat(P, shape.reshape_2d(P, im, n[0], n[2] * n[1]), shape.reshape_2d(P, a, na[0] * na[1], na[2]))
    shape.reshape_3d(P, r, n[1], na[2], n[2])


def conv_1d(ctx, a, b, s0, p0, d0):
    """1-D convolution (cross-correlation): kernel a [K, IC, OC], data b [L, IC, N] give [OL, OC, N], f32.

    GGML 0.20.2 bug: for a batch N > 1 the result is labelled [OL, OC, N] but its data is laid out as
    [OL, N, OC] (mul_mat's [N*OL, OC] result is reshaped without a permute). With N == 1 it is right.

    Args:
        ctx: the Context the result is made in.
        a: contiguous f32/f16 kernel [K, IC, OC].
        b: data [L, IC, N] (f32/f16, contiguous rows).
        s0: stride (>= 1).
        p0: zero padding on both sides (>= 0).
        d0: dilation (>= 1).
    """
    pa = _kernel("conv_1d", a)
    _replay("conv_1d", _conv_1d_recipe, a, b, s0, p0, d0)
    return make(ctx, "conv_1d", lib.ggml_conv_1d, pa, tensor("conv_1d", "b", b), s0, p0, d0)


def conv_1d_ph(ctx, a, b, s, d):
    """ops.conv_1d with "half" padding a.ne[0] // 2 (same length output for stride 1, odd K).

    Shares conv_1d's GGML 0.20.2 bug: for N > 1 the data is laid out [OL, N, OC].

    Args:
        ctx: the Context the result is made in.
        a: contiguous f32/f16 kernel [K, IC, OC].
        b: data [L, IC, N].
        s: stride (>= 1).
        d: dilation (>= 1).
    """
    pa = _kernel("conv_1d_ph", a)
    _replay("conv_1d_ph", _conv_1d_recipe, a, b, s, pa.ne[0] // 2, d)
    return make(ctx, "conv_1d_ph", lib.ggml_conv_1d_ph, pa, tensor("conv_1d_ph", "b", b), s, d)


def _conv_1d_dw_recipe(P, a, b, s0, p0, d0):
    nb = b.ne
    new_b = shape.reshape_4d(P, b, nb[0], 1, nb[1], nb[2])
    im = im2col(P, a, new_b, s0, 0, p0, 0, d0, 0, False, _im2col_type(a))
    r = linalg.mul_mat(P, im, a)
    shape.reshape_3d(P, r, r.ne[0], r.ne[2], 1)


def conv_1d_dw(ctx, a, b, s0, p0, d0):
    """Depthwise 1-D convolution: kernel a [K, 1, C], data b [L, C] give [OL, C].

    Args:
        ctx: the Context the result is made in.
        a: f32/f16 kernel [K, 1, C] (C a multiple of b's channels).
        b: contiguous data [L, C].
        s0: stride (>= 1).
        p0: zero padding (>= 0).
        d0: dilation (>= 1).
    """
    pa = _kernel("conv_1d_dw", a)
    _replay("conv_1d_dw", _conv_1d_dw_recipe, a, b, s0, p0, d0)
    return make(ctx, "conv_1d_dw", lib.ggml_conv_1d_dw, pa, tensor("conv_1d_dw", "b", b), s0, p0, d0)


def conv_1d_dw_ph(ctx, a, b, s0, d0):
    """ops.conv_1d_dw with "half" padding a.ne[0] // 2.

    Args:
        ctx: the Context the result is made in.
        a: f32/f16 kernel [K, 1, C].
        b: contiguous data [L, C].
        s0: stride (>= 1).
        d0: dilation (>= 1).
    """
    pa = _kernel("conv_1d_dw_ph", a)
    _replay("conv_1d_dw_ph", _conv_1d_dw_recipe, a, b, s0, pa.ne[0] // 2, d0)
    return make(ctx, "conv_1d_dw_ph", lib.ggml_conv_1d_dw_ph, pa, tensor("conv_1d_dw_ph", "b", b), s0, d0)


def _conv_2d_recipe(P, a, b, s0, s1, p0, p1, d0, d1):
    im = im2col(P, a, b, s0, s1, p0, p1, d0, d1, True, _im2col_type(a))
    n, na = im.ne, a.ne
    r = linalg.mul_mat(P, shape.reshape_2d(P, im, n[0], n[3] * n[2] * n[1]),
                       shape.reshape_2d(P, a, na[0] * na[1] * na[2], na[3]))
    r = shape.reshape_4d(P, r, n[1], n[2], n[3], na[3])
    shape.cont(P, shape.permute(P, r, 0, 1, 3, 2))


def conv_2d(ctx, a, b, s0, s1, p0, p1, d0, d1):
    """2-D convolution (cross-correlation): kernel a [KW, KH, IC, OC], data b [W, H, IC, N] give [OW, OH, OC, N].

    Args:
        ctx: the Context the result is made in.
        a: contiguous f32/f16 kernel [KW, KH, IC, OC].
        b: data [W, H, IC, N] (f32/f16, contiguous rows).
        s0: stride in width (>= 1).
        s1: stride in height (>= 1).
        p0: zero padding in width (>= 0).
        p1: zero padding in height (>= 0).
        d0: dilation in width (>= 1).
        d1: dilation in height (>= 1).
    """
    pa = _kernel("conv_2d", a)
    _replay("conv_2d", _conv_2d_recipe, a, b, s0, s1, p0, p1, d0, d1)
    return make(ctx, "conv_2d", lib.ggml_conv_2d, pa, tensor("conv_2d", "b", b), s0, s1, p0, p1, d0, d1)


def conv_2d_sk_p0(ctx, a, b):
    """ops.conv_2d with stride equal to the kernel size and no padding (patch embedding).

    Args:
        ctx: the Context the result is made in.
        a: contiguous f32/f16 kernel [KW, KH, IC, OC].
        b: data [W, H, IC, N].
    """
    pa = _kernel("conv_2d_sk_p0", a)
    _replay("conv_2d_sk_p0", _conv_2d_recipe, a, b, pa.ne[0], pa.ne[1], 0, 0, 1, 1)
    return make(ctx, "conv_2d_sk_p0", lib.ggml_conv_2d_sk_p0, pa, tensor("conv_2d_sk_p0", "b", b))


def conv_2d_s1_ph(ctx, a, b):
    """ops.conv_2d with stride 1 and "half" padding (a.ne[0] // 2, a.ne[1] // 2).

    Args:
        ctx: the Context the result is made in.
        a: contiguous f32/f16 kernel [KW, KH, IC, OC].
        b: data [W, H, IC, N].
    """
    pa = _kernel("conv_2d_s1_ph", a)
    _replay("conv_2d_s1_ph", _conv_2d_recipe, a, b, 1, 1, pa.ne[0] // 2, pa.ne[1] // 2, 1, 1)
    return make(ctx, "conv_2d_s1_ph", lib.ggml_conv_2d_s1_ph, pa, tensor("conv_2d_s1_ph", "b", b))


def _conv_2d_dw_recipe(P, a, b, s0, s1, p0, p1, d0, d1):
    na, nb = a.ne, b.ne
    new_a = shape.reshape_4d(P, a, na[0], na[1], 1, na[2] * na[3])
    im = im2col(P, new_a, shape.reshape_4d(P, b, nb[0], nb[1], 1, nb[2] * nb[3]), s0, s1, p0, p1, d0, d1, True,
                _im2col_type(a))
    n = im.ne
    new_b = shape.reshape_4d(P, im, n[0], n[2] * n[1], nb[2], nb[3])
    m = new_a.ne
    new_a = shape.reshape_4d(P, new_a, m[0] * m[1], m[2], m[3], 1)
    r = linalg.mul_mat(P, new_a, new_b)
    shape.reshape_4d(P, r, n[1], n[2], nb[2], nb[3])


def conv_2d_dw(ctx, a, b, s0, s1, p0, p1, d0, d1):
    """Depthwise 2-D convolution via im2col: kernel a [KW, KH, 1, C], data b [W, H, C, N] give [OW, OH, C, N].

    Args:
        ctx: the Context the result is made in.
        a: contiguous f16 kernel [KW, KH, 1, C] (f32 kernels: use conv_2d_dw_direct).
        b: contiguous data [W, H, C, N].
        s0: stride in width (>= 1).
        s1: stride in height (>= 1).
        p0: zero padding in width (>= 0).
        p1: zero padding in height (>= 0).
        d0: dilation in width (>= 1).
        d1: dilation in height (>= 1).
    """
    pa = _kernel("conv_2d_dw", a)
    if pa.type != C.F16:
        raise C.DTypeError("conv_2d_dw: the kernel must be f16: GGML multiplies it with f16 columns, which the CPU "
                           f"backend cannot do for a {C.tname(pa)} kernel (or use conv_2d_dw_direct)")
    _replay("conv_2d_dw", _conv_2d_dw_recipe, a, b, s0, s1, p0, p1, d0, d1)
    return make(ctx, "conv_2d_dw", lib.ggml_conv_2d_dw, pa, tensor("conv_2d_dw", "b", b), s0, s1, p0, p1, d0, d1)


def _conv_3d_recipe(P, a, b, IC, s0, s1, s2, p0, p1, p2, d0, d1, d2):
    im = im2col_3d(P, a, b, IC, s0, s1, s2, p0, p1, p2, d0, d1, d2, _im2col_type(a))
    na, nb, n = a.ne, b.ne, im.ne
    OC, N = na[3] // IC, nb[3] // IC
    r = linalg.mul_mat(P, shape.reshape_2d(P, im, n[0], n[3] * n[2] * n[1]),
                       shape.reshape_2d(P, a, na[0] * na[1] * na[2] * IC, OC))
    OD = n[3] // N
    r = shape.reshape_4d(P, r, n[1] * n[2], OD, N, OC)
    r = shape.cont(P, shape.permute(P, r, 0, 1, 3, 2))
    shape.reshape_4d(P, r, n[1], n[2], OD, OC * N)


def conv_3d(ctx, a, b, IC, s0, s1, s2, p0, p1, p2, d0, d1, d2):
    """3-D convolution via im2col_3d: kernel a [KW, KH, KD, OC*IC], data b [W, H, D, N*IC] give [OW, OH, OD, N*OC].

    Args:
        ctx: the Context the result is made in.
        a: contiguous f32/f16 kernel [KW, KH, KD, OC*IC].
        b: f32 data [W, H, D, N*IC].
        IC: input channels (>= 1, dividing a.ne[3] and b.ne[3]).
        s0: stride in width.
        s1: stride in height.
        s2: stride in depth.
        p0: padding in width.
        p1: padding in height.
        p2: padding in depth.
        d0: dilation in width.
        d1: dilation in height.
        d2: dilation in depth.
    """
    pa = _kernel("conv_3d", a)
    C.integer("conv_3d", "IC", IC, 1)
    if pa.ne[3] % IC:
        C.fail("conv_3d", f"kernel a ne={C.ne(pa)}: a.ne[3] must be a multiple of IC={IC}")
    args = (IC, s0, s1, s2, p0, p1, p2, d0, d1, d2)
    _replay("conv_3d", _conv_3d_recipe, a, b, *args)
    return make(ctx, "conv_3d", lib.ggml_conv_3d, pa, tensor("conv_3d", "b", b), *args)
