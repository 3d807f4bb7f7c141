"""Elementwise builders: unary functions, binary arithmetic with broadcasting, scale, clamp, fill, GLUs.

Most are generated from the tables below by small factories (one per signature); `_inplace`
variants return a view of `a` whose computation overwrites `a`'s memory.
"""

from .._lib import lib
from . import _check as C
from ._check import make, tensor, CTX_DOC

__all__ = []

_INPLACE_NOTE = ("\n\nIn place: the result is a view of `a`; computing it overwrites `a`'s memory.")


def _export(fn):
    globals()[fn.__name__] = fn
    __all__.append(fn.__name__)
    return fn


def _types_text(types):
    return "/".join(C.tname(t) for t in sorted(types))


# ----------------------------------------------------------------------------------------------------
# unary: name -> (formula, dtypes, rows check, has inplace variant)

_ROWS, _CONT1 = "rows", "cont1"
UNARY = {
    "abs": ("|a|", C.FLOATS, _ROWS, True),
    "sgn": ("sign(a) (-1, 0 or 1)", C.FLOATS, _ROWS, True),
    "neg": ("-a", C.FLOATS, _ROWS, True),
    "step": ("1 where a > 0, else 0", C.FLOATS, _ROWS, True),
    "tanh": ("tanh(a)", C.FLOATS, _ROWS, True),
    "elu": ("a where a > 0, else exp(a) - 1", C.FLOATS, _ROWS, True),
    "relu": ("max(a, 0)", C.FLOATS, _ROWS, True),
    "sigmoid": ("1 / (1 + exp(-a))", C.FLOATS, _ROWS, True),
    "gelu": ("GELU, tanh approximation: 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3)))", C.F32_F16, _CONT1, True),
    "gelu_erf": ("GELU with erf: 0.5 a (1 + erf(a / sqrt(2)))", C.F32_F16, _CONT1, True),
    "gelu_quick": ("a * sigmoid(1.702 a)", C.F32_F16, _CONT1, True),
    "silu": ("a * sigmoid(a)", C.F32_F16, _CONT1, True),
    "hardswish": ("a * min(max(a + 3, 0), 6) / 6", C.FLOATS, _ROWS, False),
    "hardsigmoid": ("min(max(a + 3, 0), 6) / 6", C.FLOATS, _ROWS, False),
    "exp": ("exp(a)", C.FLOATS, _ROWS, True),
    "expm1": ("exp(a) - 1", C.FLOATS, _ROWS, True),
    "softplus": ("log(1 + exp(a))", C.FLOATS, _ROWS, True),
    "floor": ("floor(a)", C.FLOATS, _ROWS, True),
    "ceil": ("ceil(a)", C.FLOATS, _ROWS, True),
    "round": ("round(a), halves away from zero", C.FLOATS, _ROWS, True),
    "trunc": ("trunc(a), towards zero", C.FLOATS, _ROWS, True),
    # these have their own GGML op rather than GGML_OP_UNARY, but the same rules
    "sqr": ("a * a", C.FLOATS, _ROWS, True),
    "sqrt": ("sqrt(a)", C.FLOATS, _ROWS, True),
    "log": ("log(a)", C.FLOATS, _ROWS, True),
    "sin": ("sin(a)", C.FLOATS, _ROWS, True),
    "cos": ("cos(a)", C.FLOATS, _ROWS, True),
}

UNARY_OPS = {n[len("GGML_UNARY_OP_"):].lower(): getattr(lib, n) for n in dir(lib)
             if n.startswith("GGML_UNARY_OP_") and n != "GGML_UNARY_OP_COUNT"}


def _check_unary(op, pa, types, rows):
    if pa.type not in types:
        C.bad_type(op, "a", pa, types)
    if rows is _CONT1:
        C.contiguous_1(op, "a", pa)
    elif not lib.ggml_is_contiguous_rows(pa):
        C.contiguous_rows(op, "a", pa)


def _unary(name, formula, types, rows, inplace):
    fn = getattr(lib, "ggml_" + name)

    def builder(ctx, a):
        pa = tensor(name, "a", a)
        _check_unary(name, pa, types, rows)
        return make(ctx, name, fn, pa)

    doc = (f"Elementwise {formula}; same shape and type as `a`."
           f"{_INPLACE_NOTE if inplace else ''}\n\n"
           f"Args:\n    {CTX_DOC}\n    a: input tensor ({_types_text(types)})"
           f"{', contiguous in dims >= 1' if rows is _CONT1 else ' with contiguous rows'}.\n")
    return C.finish(builder, doc, name, __name__)


for _name, (_formula, _types, _rows, _has_inplace) in UNARY.items():
    _export(_unary(_name, _formula, _types, _rows, False))
    if _has_inplace:
        _export(_unary(_name + "_inplace", _formula, _types, _rows, True))


def _unary_by_op(name, inplace):
    fn = getattr(lib, "ggml_" + name)

    def builder(ctx, a, op):
        pa = tensor(name, "a", a)
        code = C.enum(name, "op", op, UNARY_OPS)
        key = next(k for k, v in UNARY_OPS.items() if v == code)
        _, types, rows, _ = UNARY.get(key, (None, C.FLOATS, _CONT1, None))
        _check_unary(name, pa, types, rows)
        return make(ctx, name, fn, pa, code)

    doc = (f"The unary function `op` applied elementwise (GGML_OP_UNARY); same shape and type as `a`."
           f"{_INPLACE_NOTE if inplace else ''}\n\n"
           f"Args:\n    {CTX_DOC}\n    a: input tensor (f32/f16/bf16; see the op's own builder).\n"
           f"    op: `enum ggml_unary_op` value or name: {', '.join(UNARY_OPS)}.\n")
    return C.finish(builder, doc, name, __name__)


_export(_unary_by_op("unary", False))
_export(_unary_by_op("unary_inplace", True))


@_export
def leaky_relu(ctx, a, negative_slope, inplace=False):
    """Elementwise `a` where a > 0, else `negative_slope * a`.

    Args:
        ctx: the Context the result is made in.
        a: input tensor (f32/f16), contiguous in dims >= 1.
        negative_slope: slope for negative inputs.
        inplace: True to return a view of `a` that overwrites it when computed.
    """
    pa = tensor("leaky_relu", "a", a)
    _check_unary("leaky_relu", pa, C.F32_F16, _CONT1)
    return make(ctx, "leaky_relu", lib.ggml_leaky_relu, pa, float(negative_slope), bool(inplace))


@_export
def xielu(ctx, a, alpha_n, alpha_p, beta, eps):
    """xIELU activation: a * (softplus(alpha_n) + (softplus(alpha_p) + beta) * sigmoid(beta * a)) + eps * (a > 0).

    Args:
        ctx: the Context the result is made in.
        a: input tensor (f32/f16/bf16), contiguous in dims >= 1.
        alpha_n: source value of the negative-side coefficient (softplus is applied).
        alpha_p: source value of the positive-side coefficient (softplus is applied).
        beta: the sigmoid's slope and offset.
        eps: added where a > 0.
    """
    pa = tensor("xielu", "a", a)
    _check_unary("xielu", pa, C.FLOATS, _CONT1)
    return make(ctx, "xielu", lib.ggml_xielu, pa, float(alpha_n), float(alpha_p), float(beta), float(eps))


def _dup(name, inplace):
    fn = getattr(lib, "ggml_" + name)

    def builder(ctx, a):
        pa = tensor(name, "a", a)
        return make(ctx, name, fn, pa)

    doc = (f"A copy of `a` (GGML_OP_DUP), same shape and type.{_INPLACE_NOTE if inplace else ''}\n\n"
           f"Args:\n    {CTX_DOC}\n    a: tensor to copy (any type).\n")
    return C.finish(builder, doc, name, __name__)


_export(_dup("dup", False))
_export(_dup("dup_inplace", True))


# ----------------------------------------------------------------------------------------------------
# binary arithmetic with broadcasting of b over a

# (a type, b type) pairs the CPU kernels compute; the result has a's type.
_BINARY_TYPES = frozenset({(C.F32, C.F32), (C.F16, C.F16), (C.BF16, C.BF16), (C.BF16, C.F32), (C.F16, C.F32)})
_BINARY_OK = frozenset(ta * 256 + tb for ta, tb in _BINARY_TYPES)
BINARY = {"add": "a + b", "sub": "a - b", "mul": "a * b", "div": "a / b"}


def _binary_types(op, pa, pb):
    ta = pa.type
    tb = pb.type
    if ta * 256 + tb in _BINARY_OK:
        return
    if op.startswith("add") and C.is_quantized(ta) and tb == C.F32:
        C.same_shape(op, pa, pb)  # quantized + f32 is computed row by row without broadcasting
        return
    raise C.DTypeError(f"{op}: a ({C.tname(ta)}) and b ({C.tname(tb)}) cannot be combined; supported (a, b): "
                       + ", ".join(f"({C.tname(x)}, {C.tname(y)})" for x, y in sorted(_BINARY_TYPES))
                       + (", (quantized, f32) of the same shape" if op.startswith("add") else ""))


def _binary(name, formula, inplace):
    fn = getattr(lib, "ggml_" + name)

    def builder(ctx, a, b):
        pa = tensor(name, "a", a)
        pb = tensor(name, "b", b)
        if not lib.ggml_can_repeat(pb, pa):
            C.can_repeat(name, pb, pa)
        _binary_types(name, pa, pb)
        if not lib.ggml_is_contiguous_rows(pa):
            C.contiguous_rows(name, "a", pa)
        return make(ctx, name, fn, pa, pb)

    quant = ", or quantized with b f32 of the same shape" if name.startswith("add") else ""
    doc = (f"Elementwise `{formula}`, `b` broadcast over `a` by repetition; shape and type of `a`."
           f"{_INPLACE_NOTE if inplace else ''}\n\n"
           f"Args:\n    {CTX_DOC}\n    a: left operand (f32/f16/bf16{quant}) with contiguous rows.\n"
           f"    b: right operand; each of a's dimensions must be a multiple of b's "
           f"(f32, or a's type).\n")
    return C.finish(builder, doc, name, __name__)


for _name, _formula in BINARY.items():
    _export(_binary(_name, _formula, False))
    _export(_binary(_name + "_inplace", _formula, True))


def _add1(name, inplace):
    fn = getattr(lib, "ggml_" + name)

    def builder(ctx, a, b):
        pa = tensor(name, "a", a)
        pb = tensor(name, "b", b)
        if C.nelements(pb) != 1 or pb.ne[0] != 1:
            C.fail(name, f"b must be a scalar (ne=[1, 1, 1, 1]), got ne={C.ne(pb)}")
        C.padded_1d(name, "a", pa)
        ta, tb = pa.type, pb.type
        ok = (tb == C.F32 and (ta in C.FLOATS or C.is_quantized(ta))) or (tb == ta and ta in (C.F16, C.BF16))
        if not ok:
            raise C.DTypeError(f"{name}: cannot add b ({C.tname(tb)}) to a ({C.tname(ta)}); "
                               "b must be f32 or have a's type (f16/bf16)")
        return make(ctx, name, fn, pa, pb)

    doc = (f"`a + b` for a scalar `b` (deprecated in GGML: ops.add broadcasts too)."
           f"{_INPLACE_NOTE if inplace else ''}\n\n"
           f"Args:\n    {CTX_DOC}\n    a: tensor (float or quantized), contiguous up to row padding.\n"
           f"    b: scalar tensor (ne=[1, 1, 1, 1]), f32 or a's type.\n")
    return C.finish(builder, doc, name, __name__)


_export(_add1("add1", False))
_export(_add1("add1_inplace", True))


@_export
def add_cast(ctx, a, b, type):
    """`a + b` computed into a new tensor of dtype `type` (used to add to f16/quantized weights).

    Args:
        ctx: the Context the result is made in.
        a: left operand, f16, bf16 or quantized, with contiguous rows.
        b: right operand (f32, or a's type for f16/bf16), with b.ne[0] == a.ne[0] and the other
            dimensions dividing a's; quantized `a` needs b of the same shape.
        type: the result's dtype (DType or name): a's type or f32.
    """
    op = "add_cast"
    pa = tensor(op, "a", a)
    pb = tensor(op, "b", b)
    tv = C.dtype(op, "type", type)
    if pb.ne[0] != pa.ne[0] or not lib.ggml_can_repeat(pb, pa):
        C.fail(op, f"b ne={C.ne(pb)} must have a's row length and broadcast over a ne={C.ne(pa)}")
    ta = pa.type
    if ta not in (C.F16, C.BF16) and not C.is_quantized(ta):
        raise C.DTypeError(f"{op}: a must be f16, bf16 or quantized, got {C.tname(ta)}")
    if tv not in (ta, C.F32):
        raise C.DTypeError(f"{op}: type must be a's type ({C.tname(ta)}) or f32, got {C.tname(tv)}")
    if C.is_quantized(ta):
        C.types(op, "b", pb, C.ONLY_F32)
        C.same_shape(op, pa, pb)
    elif pb.type != C.F32 and not (pb.type == ta and tv == ta):
        raise C.DTypeError(f"{op}: b must be f32 (or {C.tname(ta)} with type={C.tname(ta)}), got {C.tname(pb)}")
    C.contiguous_rows(op, "a", pa)
    C.contiguous_rows(op, "b", pb)
    return make(ctx, op, lib.ggml_add_cast, pa, pb, tv)


@_export
def add_id(ctx, a, b, ids):
    """`dst[i0, i1, i2] = a[i0, i1, i2] + b[i0, ids[i1, i2]]` (per-expert biases in MoE layers).

    Args:
        ctx: the Context the result is made in.
        a: f32 tensor [n, n_used, n_tokens, 1] with contiguous rows.
        b: f32 table of rows [n, n_rows]; row ids[i1, i2] is added to a[:, i1, i2].
        ids: i32 row indices [n_used, n_tokens] (each in [0, b.ne[1])).
    """
    op = "add_id"
    pa = tensor(op, "a", a)
    pb = tensor(op, "b", b)
    pi = tensor(op, "ids", ids)
    C.types(op, "a", pa, C.ONLY_F32)
    C.types(op, "b", pb, C.ONLY_F32)
    C.types(op, "ids", pi, frozenset({C.I32}))
    if pa.ne[0] != pb.ne[0] or pa.ne[1] != pi.ne[0] or pa.ne[2] != pi.ne[1]:
        C.fail(op, f"a ne={C.ne(pa)}, b ne={C.ne(pb)} and ids ne={C.ne(pi)} don't match "
                   "(need a.ne[0] == b.ne[0], a.ne[1] == ids.ne[0], a.ne[2] == ids.ne[1])")
    C.contiguous_rows(op, "a", pa)
    C.contiguous_rows(op, "b", pb)
    return make(ctx, op, lib.ggml_add_id, pa, pb, pi)


def _scale(name, with_bias, inplace):
    fn = getattr(lib, "ggml_" + name)

    def check(pa):
        C.types(name, "a", pa, C.ONLY_F32)
        C.contiguous(name, "a", pa)

    if with_bias:
        def builder(ctx, a, s, b):
            pa = tensor(name, "a", a)
            check(pa)
            return make(ctx, name, fn, pa, float(s), float(b))
        what, extra = "`s * a + b`", "\n    s: the factor.\n    b: the added constant (a float).\n"
    else:
        def builder(ctx, a, s):
            pa = tensor(name, "a", a)
            check(pa)
            return make(ctx, name, fn, pa, float(s))
        what, extra = "`s * a`", "\n    s: the factor.\n"
    doc = (f"Elementwise {what}.{_INPLACE_NOTE if inplace else ''}\n\n"
           f"Args:\n    {CTX_DOC}\n    a: contiguous f32 tensor.{extra}")
    return C.finish(builder, doc, name, __name__)


_export(_scale("scale", False, False))
_export(_scale("scale_inplace", False, True))
_export(_scale("scale_bias", True, False))
_export(_scale("scale_bias_inplace", True, True))


@_export
def clamp(ctx, a, min, max):
    """Elementwise `min(max(a, min), max)`.

    GGML makes the result a view of `a`: computing it overwrites `a`'s memory.

    Args:
        ctx: the Context the result is made in.
        a: input tensor (f32/f16), contiguous in dims >= 1.
        min: lower bound.
        max: upper bound.
    """
    pa = tensor("clamp", "a", a)
    _check_unary("clamp", pa, C.F32_F16, _CONT1)
    return make(ctx, "clamp", lib.ggml_clamp, pa, float(min), float(max))


def _fill(name, inplace):
    fn = getattr(lib, "ggml_" + name)

    def builder(ctx, a, c):
        pa = tensor(name, "a", a)
        C.types(name, "a", pa, C.F32_F16)
        C.contiguous(name, "a", pa)
        return make(ctx, name, fn, pa, float(c))

    doc = (f"A tensor of a's shape and type filled with the constant `c`.{_INPLACE_NOTE if inplace else ''}\n\n"
           f"Args:\n    {CTX_DOC}\n    a: contiguous f32/f16 tensor giving shape and type.\n    c: the value.\n")
    return C.finish(builder, doc, name, __name__)


_export(_fill("fill", False))
_export(_fill("fill_inplace", True))
