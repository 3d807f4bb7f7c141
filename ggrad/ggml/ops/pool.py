"""Pooling and resampling: pool_1d, pool_2d, upscale, interpolate."""

from .._lib import lib
from . import _check as C
from ._check import make, tensor

__all__ = ["pool_1d", "pool_2d", "upscale", "upscale_ext", "interpolate"]

POOL_OPS = {"max": lib.GGML_OP_POOL_MAX, "avg": lib.GGML_OP_POOL_AVG}
SCALE_MODES = {"nearest": lib.GGML_SCALE_MODE_NEAREST, "bilinear": lib.GGML_SCALE_MODE_BILINEAR,
               "bicubic": lib.GGML_SCALE_MODE_BICUBIC}
SCALE_FLAGS = {"align_corners": lib.GGML_SCALE_FLAG_ALIGN_CORNERS, "antialias": lib.GGML_SCALE_FLAG_ANTIALIAS}
_INT32_MAX = 2**31 - 1


def _pool_out(ins, k, s, p):
    return int((ins + 2 * p - k) / s + 1)


def pool_1d(ctx, a, op, k0, s0, p0):
    """1-D max/average pooling along dimension 0; f32 result.

    Args:
        ctx: the Context the result is made in.
        a: contiguous f32/f16 input.
        op: "max" or "avg" (or the `enum ggml_op_pool` value).
        k0: kernel size (>= 1).
        s0: stride (>= 1).
        p0: padding (>= 0).
    """
    name = "pool_1d"
    pa = tensor(name, "a", a)
    code = C.enum(name, "op", op, POOL_OPS)
    C.integer(name, "k0", k0, 1, _INT32_MAX)
    C.integer(name, "s0", s0, 1, _INT32_MAX)
    C.integer(name, "p0", p0, 0, _INT32_MAX)
    C.types(name, "a", pa, C.F32_F16)
    C.contiguous(name, "a", pa)
    if _pool_out(pa.ne[0], k0, s0, p0) <= 0:
        C.fail(name, f"a ne={C.ne(pa)} is too short for k0={k0} (s0={s0}, p0={p0})")
    return make(ctx, name, lib.ggml_pool_1d, pa, code, k0, s0, p0)


def pool_2d(ctx, a, op, k0, k1, s0, s1, p0, p1):
    """2-D max/average pooling over dimensions 0 and 1; f32 result [OW, OH, ne2, ne3].

    Args:
        ctx: the Context the result is made in.
        a: contiguous f32/f16 input [W, H, C, N].
        op: "max" or "avg" (or the `enum ggml_op_pool` value).
        k0: kernel width (>= 1).
        k1: kernel height (>= 1).
        s0: stride in width (>= 1).
        s1: stride in height (>= 1).
        p0: padding in width (float, >= 0).
        p1: padding in height (float, >= 0).
    """
    name = "pool_2d"
    pa = tensor(name, "a", a)
    code = pool_2d_checks(name, pa, op, k0, k1, s0, s1, p0, p1)
    return make(ctx, name, lib.ggml_pool_2d, pa, code, k0, k1, s0, s1, float(p0), float(p1))


def pool_2d_checks(name, pa, op, k0, k1, s0, s1, p0, p1):
    code = C.enum(name, "op", op, POOL_OPS)
    for n, v in (("k0", k0), ("k1", k1), ("s0", s0), ("s1", s1)):
        C.integer(name, n, v, 1, _INT32_MAX)
    if not (float(p0) >= 0 and float(p1) >= 0):
        raise C.ArgumentError(f"{name}: paddings must be >= 0, got p0={p0}, p1={p1}")
    C.types(name, "a", pa, C.F32_F16)
    C.contiguous(name, "a", pa)
    if _pool_out(pa.ne[0], k0, s0, float(p0)) <= 0 or _pool_out(pa.ne[1], k1, s1, float(p1)) <= 0:
        C.fail(name, f"a ne={C.ne(pa)} is too small for the {k0}x{k1} kernel")
    return code


def _scale_mode(op, mode, flags_ok):
    if isinstance(mode, str) and flags_ok:
        parts = [m.strip().lower() for m in mode.split("|")]
        value = C.enum(op, "mode", parts[0], SCALE_MODES)
        for f in parts[1:]:
            value |= C.enum(op, "mode flag", f, SCALE_FLAGS)
    elif flags_ok and isinstance(mode, int) and not isinstance(mode, bool):
        value = mode
        if (value & 0xFF) not in SCALE_MODES.values() or value & ~0x3FF:
            raise C.ArgumentError(f"{op}: mode {mode} is not a scale mode {sorted(SCALE_MODES)} with optional flags")
    else:
        value = C.enum(op, "mode", mode, SCALE_MODES)
    if value & lib.GGML_SCALE_FLAG_ANTIALIAS and (value & 0xFF) != lib.GGML_SCALE_MODE_BILINEAR:
        raise C.ArgumentError(f"{op}: antialias is implemented for bilinear only")
    return value


def _interp_checks(op, pa, ne):
    C.types(op, "a", pa, C.ONLY_F32)
    if C.nelements(pa) == 0:
        C.fail(op, f"cannot resample an empty tensor (ne={C.ne(pa)})")
    for i, v in enumerate(ne):
        C.integer(op, f"ne{i}", v, 1, _INT32_MAX)


def upscale(ctx, a, scale_factor, mode):
    """`a` enlarged by an integer factor in dimensions 0 and 1.

    Args:
        ctx: the Context the result is made in.
        a: non-empty f32 input.
        scale_factor: integer factor (> 1).
        mode: "nearest", "bilinear" or "bicubic" (or the `enum ggml_scale_mode` value).
    """
    pa = tensor("upscale", "a", a)
    C.integer("upscale", "scale_factor", scale_factor, 2, _INT32_MAX)
    code = _scale_mode("upscale", mode, False)
    _interp_checks("upscale", pa, (pa.ne[0] * scale_factor, pa.ne[1] * scale_factor))
    return make(ctx, "upscale", lib.ggml_upscale, pa, scale_factor, code)


def upscale_ext(ctx, a, ne0, ne1, ne2, ne3, mode):
    """`a` resampled to [ne0, ne1, ne2, ne3] (deprecated in GGML: use ops.interpolate).

    Args:
        ctx: the Context the result is made in.
        a: non-empty f32 input.
        ne0: new size of dimension 0 (>= 1).
        ne1: new size of dimension 1.
        ne2: new size of dimension 2.
        ne3: new size of dimension 3.
        mode: "nearest", "bilinear" or "bicubic" (or the `enum ggml_scale_mode` value).
    """
    pa = tensor("upscale_ext", "a", a)
    code = _scale_mode("upscale_ext", mode, False)
    _interp_checks("upscale_ext", pa, (ne0, ne1, ne2, ne3))
    return make(ctx, "upscale_ext", lib.ggml_upscale_ext, pa, ne0, ne1, ne2, ne3, code)


def interpolate(ctx, a, ne0, ne1, ne2, ne3, mode):
    """`a` up- or downsampled to [ne0, ne1, ne2, ne3]; 2-D modes act on dimensions 0 and 1.

    Args:
        ctx: the Context the result is made in.
        a: non-empty f32 input.
        ne0: new size of dimension 0 (>= 1).
        ne1: new size of dimension 1.
        ne2: new size of dimension 2.
        ne3: new size of dimension 3.
        mode: "nearest", "bilinear" or "bicubic", optionally with flags ("bilinear|align_corners",
            "bilinear|antialias"), or the integer mode | GGML_SCALE_FLAG_* value.
    """
    pa = tensor("interpolate", "a", a)
    code = _scale_mode("interpolate", mode, True)
    _interp_checks("interpolate", pa, (ne0, ne1, ne2, ne3))
    return make(ctx, "interpolate", lib.ggml_interpolate, pa, ne0, ne1, ne2, ne3, code)
