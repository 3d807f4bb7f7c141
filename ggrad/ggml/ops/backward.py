"""GGML's dedicated backward ops. In all of them THE GRADIENT COMES FIRST.

Argument orders were checked against numpy (tests/ggml/test_ops_backward.py). Two header comments in
ggml.h 0.20.2 are wrong: `rms_norm_back` says "a - x, b - dy" and `cross_entropy_loss_back` says
"a: logits, b: labels, c: gradients"; the true orders are (dy, x) and (grad, logits, labels).
`im2col_back`'s header calls `a` the kernel and `b` the gradient; it is the other way round.
"""

from .._lib import ffi, lib
from ..errors import GGMLError
from . import _check as C
from ._check import make, tensor
from . import conv, nn, pool

__all__ = ["get_rows_back", "soft_max_ext_back", "soft_max_ext_back_inplace", "rms_norm_back", "silu_back",
           "rope_ext_back", "rope_multi_back", "im2col_back", "pool_2d_back", "cross_entropy_loss_back",
           "repeat_back", "flash_attn_back"]


def get_rows_back(ctx, a, b, c):
    """Gradient of ops.get_rows with respect to its data: rows of `a` summed into the rows `b` picked.

    Result: f32 of c's shape [n_embd, n_rows], zero except the rows listed in `b`.

    Args:
        ctx: the Context the result is made in.
        a: gradient of get_rows' result, f32/f16 matrix [n_embd, n_idx] with contiguous rows.
        b: the i32 row indices given to get_rows, a vector [n_idx] (each in [0, c.ne[1])).
        c: get_rows' data matrix [n_embd, n_rows] (only its shape is used).
    """
    op = "get_rows_back"
    pa, pb, pc = tensor(op, "a", a), tensor(op, "b", b), tensor(op, "c", c)
    na, nb, nc = C.ne(pa), C.ne(pb), C.ne(pc)
    if na[2:] != [1, 1] or nc[2:] != [1, 1] or nb[1:] != [1, 1, 1]:
        C.fail(op, f"a ne={na} and c ne={nc} must be matrices and b ne={nb} a vector")
    if na[0] != nc[0] or na[1] != nb[0]:
        C.fail(op, f"gradient a ne={na}, indices b ne={nb} and data c ne={nc} don't match "
                   "(need a.ne[0] == c.ne[0] and a.ne[1] == b.ne[0])")
    C.types(op, "b", pb, frozenset({C.I32}))
    C.types(op, "a", pa, C.F32_F16)
    C.contiguous_rows(op, "a", pa)
    return make(ctx, op, lib.ggml_get_rows_back, pa, pb, pc)


def _soft_max_back(name, inplace):
    fn = getattr(lib, "ggml_" + name)

    def builder(ctx, a, b, scale, max_bias):
        pa, pb = tensor(name, "a", a), tensor(name, "b", b)
        C.types(name, "a", pa, C.ONLY_F32)
        C.types(name, "b", pb, C.ONLY_F32)
        C.same_shape(name, pa, pb, "gradient a", "softmax output b")
        C.contiguous(name, "a", pa)
        C.contiguous(name, "b", pb)
        max_bias = float(max_bias)
        if max_bias != 0.0:
            raise C.ArgumentError(f"{name}: max_bias={max_bias}: GGML's CPU backend (every op's fallback) implements "
                             "the softmax backward only for max_bias == 0")
        return make(ctx, name, fn, pa, pb, float(scale), max_bias)

    note = "\n\nIn place: the result is a view of `a`; computing it overwrites `a`'s memory." if inplace else ""
    doc = (f"Gradient of ops.soft_max_ext with respect to its input: scale * y * (dy - sum(dy * y)) per row."
           f"{note}\n\nArgs:\n    ctx: the Context the result is made in.\n"
           f"    a: dy, the gradient of soft_max_ext's result (contiguous f32) - gradient first.\n"
           f"    b: y, soft_max_ext's result (contiguous f32, same shape).\n"
           f"    scale: the scale given to soft_max_ext.\n"
           f"    max_bias: the max_bias given to soft_max_ext; must be 0 (no ALiBi) on the CPU backend.\n")
    return C.finish(builder, doc, name, __name__)


soft_max_ext_back = _soft_max_back("soft_max_ext_back", False)
soft_max_ext_back_inplace = _soft_max_back("soft_max_ext_back_inplace", True)


def rms_norm_back(ctx, a, b, eps):
    """Gradient of ops.rms_norm with respect to its input.

    The order is (dy, x): ggml.h's comment "a - x, b - dy" is wrong (checked against numpy).

    Args:
        ctx: the Context the result is made in.
        a: dy, the gradient of rms_norm's result (f32, contiguous rows) - gradient first.
        b: x, rms_norm's input (f32, same shape, contiguous rows).
        eps: the eps given to rms_norm.
    """
    op = "rms_norm_back"
    pa, pb = tensor(op, "a", a), tensor(op, "b", b)
    C.same_shape(op, pa, pb, "gradient a", "input b")
    C.types(op, "a", pa, C.ONLY_F32)
    C.types(op, "b", pb, C.ONLY_F32)
    C.contiguous_rows(op, "a", pa)
    C.contiguous_rows(op, "b", pb)
    eps = float(eps)
    if not eps >= 0.0:
        raise C.ArgumentError(f"{op}: eps must be >= 0, got {eps}")
    return make(ctx, op, lib.ggml_rms_norm_back, pa, pb, eps)


def silu_back(ctx, a, b):
    """Gradient of ops.silu: dy * sigmoid(x) * (1 + x * (1 - sigmoid(x))).

    Args:
        ctx: the Context the result is made in.
        a: dy, the gradient of silu's result (f32/f16, contiguous in dims >= 1) - gradient first.
        b: x, silu's input (same shape and type).
    """
    op = "silu_back"
    pa, pb = tensor(op, "a", a), tensor(op, "b", b)
    C.same_shape(op, pa, pb, "gradient a", "input b")
    C.types(op, "a", pa, C.F32_F16)
    if pb.type != pa.type:
        raise C.DTypeError(f"{op}: a ({C.tname(pa)}) and b ({C.tname(pb)}) must have the same type")
    C.contiguous_1(op, "a", pa)
    C.contiguous_1(op, "b", pb)
    return make(ctx, op, lib.ggml_silu_back, pa, pb)


rope_ext_back = nn._rope_ext("rope_ext_back", False, back=True)
rope_ext_back.__module__ = __name__
rope_multi_back = nn._rope_multi("rope_multi_back", False, back=True)
rope_multi_back.__module__ = __name__


def im2col_back(ctx, a, b, ne, s0, s1, p0, p1, d0, d1, is_2D):
    """Gradient of ops.im2col with respect to its data: the columns' gradient folded back (f32, shape `ne`).

    ggml.h calls `a` the kernel and `b` the gradient; the implementation takes them the other way round,
    as documented here.

    Args:
        ctx: the Context the result is made in.
        a: gradient of im2col's result, contiguous f32 of exactly im2col's result shape - gradient first.
        b: the kernel given to im2col (f32/f16; only its shape is used).
        ne: 4 ints, the shape of im2col's data input (GGML order).
        s0: stride in dimension 0 (>= 1).
        s1: stride in dimension 1 (2-D only).
        p0: padding in dimension 0 (>= 0).
        p1: padding in dimension 1 (2-D only).
        d0: dilation in dimension 0 (>= 1).
        d1: dilation in dimension 1 (2-D only).
        is_2D: True if im2col was 2-D.
    """
    op = "im2col_back"
    pa, pb = tensor(op, "a", a), tensor(op, "b", b)
    shape = C.ints(op, "ne", ne, 4)
    C.dims(op, shape)
    is_2D = bool(is_2D)
    conv._geometry(op, [("s0", s0), ("p0", p0), ("d0", d0)] + ([("s1", s1), ("p1", p1), ("d1", d1)] if is_2D else []))
    C.types(op, "a", pa, C.ONLY_F32)
    C.types(op, "b", pb, C.F32_F16)
    C.contiguous(op, "a", pa)
    k = C.ne(pb)
    ow = conv._out(shape[0], k[0], s0, p0, d0)
    if is_2D:
        oh = conv._out(shape[1], k[1], s1, p1, d1)
        expect = [shape[2] * k[1] * k[0], ow, oh, shape[3]]
        fits = k[2] == shape[2]
    else:
        expect = [shape[1] * k[0], ow, shape[2], 1]
        fits = k[1] == shape[1] and shape[3] == 1
    if not fits or min(expect) <= 0 or C.ne(pa) != expect:
        C.fail(op, f"gradient a ne={C.ne(pa)} is not the im2col result of data ne={shape} and kernel b ne={k} "
                   f"(expected ne={expect}, kernel channels matching)")
    arr = ffi.new("int64_t[4]", shape)
    return make(ctx, op, lib.ggml_im2col_back, pa, pb, arr, s0, s1, p0, p1, d0, d1, is_2D)


def pool_2d_back(ctx, a, af, op, k0, k1, s0, s1, p0, p1):
    """Gradient of ops.pool_2d with respect to its input: f32 of af's shape.

    Args:
        ctx: the Context the result is made in.
        a: gradient of pool_2d's result, contiguous f32 of pool_2d's result shape - gradient first.
        af: pool_2d's input (contiguous f32), used for the max positions and the shape.
        op: "max" or "avg", as given to pool_2d.
        k0: kernel width.
        k1: kernel height.
        s0: stride in width.
        s1: stride in height.
        p0: padding in width (truncated to an integer by GGML's backward).
        p1: padding in height.
    """
    name = "pool_2d_back"
    pa, pf = tensor(name, "a", a), tensor(name, "af", af)
    code = pool.pool_2d_checks(name, pf, op, k0, k1, s0, s1, p0, p1)
    C.types(name, "af", pf, C.ONLY_F32)
    C.types(name, "a", pa, C.ONLY_F32)
    C.contiguous(name, "a", pa)
    nf = C.ne(pf)
    expect = [pool._pool_out(nf[0], k0, s0, float(p0)), pool._pool_out(nf[1], k1, s1, float(p1)), nf[2], nf[3]]
    if C.ne(pa) != expect:
        C.fail(name, f"gradient a ne={C.ne(pa)} is not pool_2d's result shape {expect} for input af ne={nf}")
    return make(ctx, name, lib.ggml_pool_2d_back, pa, pf, code, k0, k1, s0, s1, float(p0), float(p1))


def cross_entropy_loss_back(ctx, a, b, c):
    """Gradient of ops.cross_entropy_loss with respect to the logits: a * (softmax(b) - c) / n_rows.

    The order is (grad, logits, labels): ggml.h's comment (logits, labels, grad) is wrong.

    Args:
        ctx: the Context the result is made in.
        a: the gradient of the loss, a contiguous f32 scalar - gradient first.
        b: the logits given to cross_entropy_loss (contiguous f32).
        c: the labels given to cross_entropy_loss (contiguous f32, b's shape).
    """
    op = "cross_entropy_loss_back"
    pa, pb, pc = tensor(op, "a", a), tensor(op, "b", b), tensor(op, "c", c)
    if C.nelements(pa) != 1:
        C.fail(op, f"the gradient a must be a scalar (it comes first: grad, logits, labels), got ne={C.ne(pa)}")
    C.same_shape(op, pb, pc, "logits b", "labels c")
    for name, p in (("a", pa), ("b", pb), ("c", pc)):
        C.types(op, name, p, C.ONLY_F32)
        C.contiguous(op, name, p)
    return make(ctx, op, lib.ggml_cross_entropy_loss_back, pa, pb, pc)


def repeat_back(ctx, a, b):
    """Gradient of ops.repeat: the repetitions in `a` summed into b's shape (a broadcast reduction).

    Args:
        ctx: the Context the result is made in.
        a: gradient of the repeated tensor (f32, contiguous rows) - gradient first.
        b: a tensor of the target shape (each of a's dimensions a multiple of b's).
    """
    pa, pb = tensor("repeat_back", "a", a), tensor("repeat_back", "b", b)
    C.can_repeat("repeat_back", pb, pa, "b", "a")
    C.types("repeat_back", "a", pa, C.ONLY_F32)
    C.contiguous_rows("repeat_back", "a", pa)
    return make(ctx, "repeat_back", lib.ggml_repeat_back, pa, pb)


def flash_attn_back(ctx, q, k, v, d, masked):
    """Backward of the old flash attention. Always raises: GGML 0.20.2's ggml_flash_attn_back aborts
    unconditionally ("TODO: adapt to ggml_flash_attn_ext() changes"); compose attention's gradient from
    mul_mat, soft_max_ext_back and out_prod instead.

    Args:
        ctx: the Context the result would be made in.
        q: queries [D, N, ne2, ne3].
        k: keys [D, M, kv_ne2, ne3].
        v: values, transposed [M, D, kv_ne2, ne3].
        d: gradient of the attention output [D, N, ne2, ne3].
        masked: whether causal masking was applied.
    """
    for name, x in (("q", q), ("k", k), ("v", v), ("d", d)):
        tensor("flash_attn_back", name, x)
    raise GGMLError("flash_attn_back: GGML 0.20.2's ggml_flash_attn_back is not implemented (it aborts "
                    "unconditionally); build attention's gradient from mul_mat, soft_max_ext_back and out_prod")
