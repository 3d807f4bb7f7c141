"""Builders that rearrange or assemble data: concat, repeat, pad, roll, acc/set, get_rows/set_rows, masks."""

from .._lib import lib
from . import _check as C
from ._check import make, tensor, CTX_DOC
from .shape import _NO_FROM_FLOAT

__all__ = ["concat", "repeat", "repeat_4d", "pad", "pad_circular", "pad_ext", "pad_ext_circular",
           "pad_reflect_1d", "roll", "get_rows", "set_rows"]

_INT32_MAX = 2**31 - 1
_INPLACE_NOTE = "\n\nIn place: the result is a view of `a`; computing it overwrites `a`'s memory."


def _export(fn):
    globals()[fn.__name__] = fn
    __all__.append(fn.__name__)
    return fn


def concat(ctx, a, b, dim):
    """`a` and `b` joined along GGML dimension `dim` (0 = innermost).

    Args:
        ctx: the Context the result is made in.
        a: first part (non-quantized; any strides: GGML's CPU, CUDA and Vulkan kernels read views,
            transposed ones too).
        b: second part, a's type, equal to `a` in every dimension but `dim`.
        dim: the dimension joined along, 0..3.
    """
    pa = tensor("concat", "a", a)
    pb = tensor("concat", "b", b)
    C.integer("concat", "dim", dim, 0, 3)
    if pa.type != pb.type:
        raise C.DTypeError(f"concat: a ({C.tname(pa)}) and b ({C.tname(pb)}) must have the same type")
    na, nb = C.ne(pa), C.ne(pb)
    for d in range(4):
        if d != dim and na[d] != nb[d]:
            C.fail("concat", f"a ne={na} and b ne={nb} must be equal except in dim {dim} (differ in dim {d})")
    C.not_quantized("concat", "a", pa)
    return make(ctx, "concat", lib.ggml_concat, pa, pb, dim)


_REPEAT_TYPES = frozenset({C.F32, C.F16, C.BF16, C.I16, C.I32, C.I64})


def repeat(ctx, a, b):
    """`a` tiled to b's shape (only b's shape is used).

    Args:
        ctx: the Context the result is made in.
        a: the tile (f32/f16/bf16/i16/i32/i64, contiguous rows).
        b: a tensor whose dimensions are multiples of a's.
    """
    pa = tensor("repeat", "a", a)
    pb = tensor("repeat", "b", b)
    C.can_repeat("repeat", pa, pb, "a", "b")
    C.types("repeat", "a", pa, _REPEAT_TYPES)
    C.contiguous_rows("repeat", "a", pa)
    return make(ctx, "repeat", lib.ggml_repeat, pa, pb)


def repeat_4d(ctx, a, ne0, ne1, ne2, ne3):
    """`a` tiled to the shape [ne0, ne1, ne2, ne3].

    Args:
        ctx: the Context the result is made in.
        a: the tile (f32/f16/bf16/i16/i32/i64, contiguous rows).
        ne0: size of dimension 0, a multiple of a.ne[0].
        ne1: size of dimension 1, a multiple of a.ne[1].
        ne2: size of dimension 2, a multiple of a.ne[2].
        ne3: size of dimension 3, a multiple of a.ne[3].
    """
    pa = tensor("repeat_4d", "a", a)
    new = (ne0, ne1, ne2, ne3)
    C.dims("repeat_4d", new)
    na = C.ne(pa)
    if 0 not in na and any(n % m for n, m in zip(new, na)):
        C.fail("repeat_4d", f"a ne={na} cannot be tiled to ne={list(new)} (each must be a multiple of a's)")
    C.types("repeat_4d", "a", pa, _REPEAT_TYPES)
    C.contiguous_rows("repeat_4d", "a", pa)
    return make(ctx, "repeat_4d", lib.ggml_repeat_4d, pa, ne0, ne1, ne2, ne3)


def _pads(op, pa, values, circular):
    names = ("p0", "p1", "p2", "p3") if len(values) == 4 else ("lp0", "rp0", "lp1", "rp1", "lp2", "rp2", "lp3", "rp3")
    for name, v in zip(names, values):
        C.integer(op, name, v, 0, _INT32_MAX)
    C.types(op, "a", pa, C.ONLY_F32)
    if circular and C.nelements(pa) == 0:
        C.fail(op, f"cannot pad an empty tensor (ne={C.ne(pa)}) circularly")


def pad(ctx, a, p0, p1, p2, p3):
    """`a` with p_i zeros appended at the end of dimension i.

    Args:
        ctx: the Context the result is made in.
        a: f32 tensor.
        p0: zeros after dimension 0 (>= 0).
        p1: zeros after dimension 1.
        p2: zeros after dimension 2.
        p3: zeros after dimension 3.
    """
    pa = tensor("pad", "a", a)
    _pads("pad", pa, (p0, p1, p2, p3), False)
    return make(ctx, "pad", lib.ggml_pad, pa, p0, p1, p2, p3)


def pad_circular(ctx, a, p0, p1, p2, p3):
    """`a` padded at the end of each dimension with values wrapped around from its start.

    Args:
        ctx: the Context the result is made in.
        a: non-empty f32 tensor.
        p0: padding after dimension 0 (>= 0).
        p1: padding after dimension 1.
        p2: padding after dimension 2.
        p3: padding after dimension 3.
    """
    pa = tensor("pad_circular", "a", a)
    _pads("pad_circular", pa, (p0, p1, p2, p3), True)
    return make(ctx, "pad_circular", lib.ggml_pad_circular, pa, p0, p1, p2, p3)


def _pad_ext(name, circular):
    fn = getattr(lib, "ggml_" + name)

    def builder(ctx, a, lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3):
        pa = tensor(name, "a", a)
        _pads(name, pa, (lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3), circular)
        return make(ctx, name, fn, pa, lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3)

    how = "values wrapped around from the other side" if circular else "zeros"
    sides = "".join(f"\n    lp{i}: padding before dimension {i} (>= 0).\n    rp{i}: padding after dimension {i}."
                    for i in range(4))
    doc = (f"`a` padded with {how} before (lp_i) and after (rp_i) each dimension.\n\n"
           f"Args:\n    {CTX_DOC}\n    a: f32 tensor{' (non-empty)' if circular else ''}.{sides}\n")
    return C.finish(builder, doc, name, __name__)


pad_ext = _pad_ext("pad_ext", False)
pad_ext_circular = _pad_ext("pad_ext_circular", True)


def pad_reflect_1d(ctx, a, p0, p1):
    """`a` padded in dimension 0 by reflection: [a, b, c, d] with (1, 1) -> [b, a, b, c, d, c].

    Args:
        ctx: the Context the result is made in.
        a: contiguous f32 tensor.
        p0: padding before dimension 0, 0 <= p0 < a.ne[0].
        p1: padding after dimension 0, 0 <= p1 < a.ne[0].
    """
    pa = tensor("pad_reflect_1d", "a", a)
    C.types("pad_reflect_1d", "a", pa, C.ONLY_F32)
    C.contiguous("pad_reflect_1d", "a", pa)
    n0 = pa.ne[0]
    C.integer("pad_reflect_1d", "p0", p0, 0, n0 - 1)
    C.integer("pad_reflect_1d", "p1", p1, 0, n0 - 1)
    return make(ctx, "pad_reflect_1d", lib.ggml_pad_reflect_1d, pa, p0, p1)


def roll(ctx, a, shift0, shift1, shift2, shift3):
    """`a` rotated by shift_i positions along each dimension i (elements wrap around).

    Args:
        ctx: the Context the result is made in.
        a: f32 tensor with contiguous rows.
        shift0: shift along dimension 0, |shift0| < a.ne[0].
        shift1: shift along dimension 1, |shift1| < a.ne[1].
        shift2: shift along dimension 2, |shift2| < a.ne[2].
        shift3: shift along dimension 3, |shift3| < a.ne[3].
    """
    pa = tensor("roll", "a", a)
    C.types("roll", "a", pa, C.ONLY_F32)
    C.contiguous_rows("roll", "a", pa)
    for i, s in enumerate((shift0, shift1, shift2, shift3)):
        n = pa.ne[i]
        C.integer("roll", f"shift{i}", s, -(n - 1), n - 1)
    return make(ctx, "roll", lib.ggml_roll, pa, shift0, shift1, shift2, shift3)


# ----------------------------------------------------------------------------------------------------
# acc and set: b added to / written into a strided view of a

def _strided(op, pa, pb, nb1, nb2, nb3, offset, strict):
    """b laid out with element stride a.nb[0] and strides nb1..nb3 at `offset` must stay inside a."""
    for name, v in (("nb1", nb1), ("nb2", nb2), ("nb3", nb3), ("offset", offset)):
        C.integer(op, name, v, 0, _INT32_MAX)  # GGML stores them as int32
    C.contiguous(op, "a", pa)
    if C.nelements(pb) > C.nelements(pa):
        C.fail(op, f"b ne={C.ne(pb)} has more elements than a ne={C.ne(pa)}")
    if pb.nb[0] != lib.ggml_type_size(pb.type):
        C.contiguous_rows(op, "b", pb)
    n = pb.ne
    if 0 in (n[0], n[1], n[2], n[3]):
        return
    last = offset + (n[0] - 1) * pa.nb[0] + (n[1] - 1) * nb1 + (n[2] - 1) * nb2 + (n[3] - 1) * nb3
    limit = lib.ggml_nbytes(pa)
    if (last >= limit) if strict else (last + pa.nb[0] > limit):
        C.fail(op, f"b ne={C.ne(pb)} with strides nb1={nb1}, nb2={nb2}, nb3={nb3} at offset {offset} reaches "
                   f"past the end of a (ne={C.ne(pa)}, {limit} bytes)")


def _acc(name, inplace):
    fn = getattr(lib, "ggml_" + name)

    def builder(ctx, a, b, nb1, nb2, nb3, offset):
        pa = tensor(name, "a", a)
        pb = tensor(name, "b", b)
        C.types(name, "a", pa, C.ONLY_F32)
        C.types(name, "b", pb, C.ONLY_F32)
        _strided(name, pa, pb, nb1, nb2, nb3, offset, True)
        return make(ctx, name, fn, pa, pb, nb1, nb2, nb3, offset)

    doc = (f"A copy of `a` with `b` added into the view of it given by strides nb1..nb3 and a byte offset."
           f"{_INPLACE_NOTE if inplace else ''}\n\n"
           f"Args:\n    {CTX_DOC}\n    a: contiguous f32 tensor.\n    b: f32 tensor (contiguous rows) added in.\n"
           f"    nb1: the view's row stride in bytes.\n    nb2: the view's dimension-2 stride in bytes.\n"
           f"    nb3: the view's dimension-3 stride in bytes.\n    offset: byte offset of the view in `a`.\n")
    return C.finish(builder, doc, name, __name__)


_SET_TYPES = frozenset({C.F32, C.I32})


def _set(name, kind, inplace):
    fn = getattr(lib, "ggml_" + name)

    def check(pa, pb, nb1, nb2, nb3, offset):
        C.types(name, "a", pa, _SET_TYPES)
        if pb.type != pa.type:
            raise C.DTypeError(f"{name}: b ({C.tname(pb)}) must have a's type ({C.tname(pa)})")
        C.integer(name, "offset", offset, 0, (1 << 30) - 1)
        _strided(name, pa, pb, nb1, nb2, nb3, offset, False)

    if kind == "4d":
        def builder(ctx, a, b, nb1, nb2, nb3, offset):
            pa, pb = tensor(name, "a", a), tensor(name, "b", b)
            check(pa, pb, nb1, nb2, nb3, offset)
            return make(ctx, name, fn, pa, pb, nb1, nb2, nb3, offset)
        strides = ("    nb1: the view's row stride in bytes.\n    nb2: the view's dimension-2 stride in bytes.\n"
                   "    nb3: the view's dimension-3 stride in bytes.\n")
    elif kind == "2d":
        def builder(ctx, a, b, nb1, offset):
            pa, pb = tensor(name, "a", a), tensor(name, "b", b)
            check(pa, pb, nb1, pa.nb[2], pa.nb[3], offset)
            return make(ctx, name, fn, pa, pb, nb1, offset)
        strides = "    nb1: the view's row stride in bytes (dims 2 and 3 use a's strides).\n"
    else:
        def builder(ctx, a, b, offset):
            pa, pb = tensor(name, "a", a), tensor(name, "b", b)
            check(pa, pb, pa.nb[1], pa.nb[2], pa.nb[3], offset)
            return make(ctx, name, fn, pa, pb, offset)
        strides = ""
    doc = (f"A copy of `a` with `b` written into the view of it at a byte offset"
           f"{' with the given strides' if strides else ' with the strides of a'}."
           f"{_INPLACE_NOTE if inplace else ''}\n\n"
           f"Args:\n    {CTX_DOC}\n    a: contiguous f32/i32 tensor.\n    b: tensor of a's type (contiguous rows).\n"
           f"{strides}    offset: byte offset of the view in `a`.\n")
    return C.finish(builder, doc, name, __name__)


_export(_acc("acc", False))
_export(_acc("acc_inplace", True))
for _kind, _suffix in (("4d", ""), ("1d", "_1d"), ("2d", "_2d")):
    _export(_set("set" + _suffix, _kind, False))
    _export(_set("set" + _suffix + "_inplace", _kind, True))


# ----------------------------------------------------------------------------------------------------
# rows

def get_rows(ctx, a, b):
    """Rows of `a` picked by the indices in `b` (embedding lookup): result [a.ne0, b.ne0, b.ne1, b.ne2].

    The result is f32 (i32 for an i32 `a`). Indices must lie in [0, a.ne[1]).

    Args:
        ctx: the Context the result is made in.
        a: the data [n_embd, n_rows, ne2, ne3] (float, quantized or i32) with contiguous rows.
        b: i32 row indices [n_idx, ne2, ne3] (b.ne[1] == a.ne[2], b.ne[2] == a.ne[3], b.ne[3] == 1).
    """
    pa = tensor("get_rows", "a", a)
    pb = tensor("get_rows", "b", b)
    nb = pb.ne
    if pa.ne[2] != nb[1] or pa.ne[3] != nb[2] or nb[3] != 1:
        C.fail("get_rows", f"a ne={C.ne(pa)} and indices b ne={C.ne(pb)} don't match "
                           "(need b.ne[1] == a.ne[2], b.ne[2] == a.ne[3], b.ne[3] == 1)")
    if pb.type != C.I32:
        C.bad_type("get_rows", "b", pb, frozenset({C.I32}))
    if pa.type != C.I32:
        C.float_or_quant("get_rows", "a", pa)
    if pa.nb[0] != lib.ggml_type_size(pa.type):
        C.contiguous_rows("get_rows", "a", pa)
    return make(ctx, "get_rows", lib.ggml_get_rows, pa, pb)


def set_rows(ctx, a, b, c):
    """`a` with rows c[i] replaced by the rows of `b` (converted to a's type); a view of `a`.

    Args:
        ctx: the Context the result is made in.
        a: destination [n_embd, n_rows, ne2, ne3], contiguous rows; computing the result writes into it.
        b: source rows (f32/f16) [n_embd, n_idx, ne2, ne3].
        c: i32/i64 row indices [n_idx, ne11, ne12, 1] with b.ne[2] % ne11 == 0 and b.ne[3] % ne12 == 0;
            each in [0, a.ne[1]).
    """
    op = "set_rows"
    pa = tensor(op, "a", a)
    pb = tensor(op, "b", b)
    pc = tensor(op, "c", c)
    na, nb, nc = C.ne(pa), C.ne(pb), C.ne(pc)
    if (na[0] != nb[0] or na[2] != nb[2] or na[3] != nb[3] or nb[1] != nc[0]
            or not C.divides(nc[1], nb[2]) or not C.divides(nc[2], nb[3]) or nc[3] != 1):
        C.fail(op, f"a ne={na}, b ne={nb} and indices c ne={nc} don't match (need a, b equal in dims 0, 2, 3, "
                   "b.ne[1] == c.ne[0], c.ne[1] | b.ne[2], c.ne[2] | b.ne[3], c.ne[3] == 1)")
    C.types(op, "b", pb, C.F32_F16)
    C.types(op, "c", pc, C.INDEX)
    if pa.type in _NO_FROM_FLOAT or not (pa.type in C.FLOATS or C.is_quantized(pa.type)):
        raise C.DTypeError(f"{op}: cannot write rows into a tensor of type {C.tname(pa)}")
    C.contiguous_rows(op, "a", pa)
    C.contiguous_rows(op, "b", pb)
    return make(ctx, op, lib.ggml_set_rows, pa, pb, pc)


def _diag_mask(name, value, inplace):
    fn = getattr(lib, "ggml_" + name)

    def builder(ctx, a, n_past):
        pa = tensor(name, "a", a)
        C.types(name, "a", pa, C.ONLY_F32)
        C.contiguous(name, "a", pa)
        C.integer(name, "n_past", n_past, 0, _INT32_MAX)
        return make(ctx, name, fn, pa, n_past)

    doc = (f"`a` with element [i0, i1] set to {value} where i0 > n_past + i1 (GGML order; the causal mask:"
           f" numpy's [..., i, j] with j > n_past + i).{_INPLACE_NOTE if inplace else ''}\n\n"
           f"Args:\n    {CTX_DOC}\n    a: contiguous f32 tensor.\n"
           f"    n_past: how many leading positions every row may see beyond the diagonal (>= 0).\n")
    return C.finish(builder, doc, name, __name__)


_export(_diag_mask("diag_mask_inf", "-inf", False))
_export(_diag_mask("diag_mask_inf_inplace", "-inf", True))
_export(_diag_mask("diag_mask_zero", "0", False))
_export(_diag_mask("diag_mask_zero_inplace", "0", True))
