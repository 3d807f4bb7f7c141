"""Gated linear units: act(x1) * x2 over the halves of each row (or act(a) * b for the _split forms)."""

from .._lib import lib
from . import _check as C
from ._check import make, tensor, CTX_DOC

__all__ = []


def _export(fn):
    globals()[fn.__name__] = fn
    __all__.append(fn.__name__)
    return fn


GLU_OPS = {n[len("GGML_GLU_OP_"):].lower(): getattr(lib, n) for n in dir(lib)
           if n.startswith("GGML_GLU_OP_") and n != "GGML_GLU_OP_COUNT"}
_GLU_ACT = {"reglu": "relu", "geglu": "gelu (tanh approximation)", "swiglu": "silu",
            "geglu_erf": "gelu (erf)", "geglu_quick": "gelu_quick"}


def _check_glu(op, pa, pb, code):
    types = C.ONLY_F32 if code == lib.GGML_GLU_OP_SWIGLU_OAI else C.F32_F16
    C.types(op, "a", pa, types)
    C.contiguous_1(op, "a", pa)
    if pb is None:
        if pa.ne[0] % 2:
            C.fail(op, f"a ne={C.ne(pa)}: the row length must be even (value and gate halves)")
        return
    C.contiguous_1(op, "b", pb)
    C.same_shape(op, pa, pb)
    if pa.type != pb.type:
        raise C.DTypeError(f"{op}: a ({C.tname(pa)}) and b ({C.tname(pb)}) must have the same type")


def _glu_fixed(name, act, code, form):
    fn = getattr(lib, "ggml_" + name)
    if form == "split":
        def builder(ctx, a, b):
            pa = tensor(name, "a", a)
            pb = tensor(name, "b", b)
            _check_glu(name, pa, pb, code)
            return make(ctx, name, fn, pa, pb)
        what = f"`{act}(a) * b`, shape of `a`"
        args = "    a: the activated half (f32/f16), contiguous in dims >= 1.\n    b: the multiplier, same shape and type.\n"
    else:
        def builder(ctx, a):
            pa = tensor(name, "a", a)
            _check_glu(name, pa, None, code)
            return make(ctx, name, fn, pa)
        order = "x1 * " + act + "(x2)" if form == "swapped" else act + "(x1) * x2"
        what = (f"`{order}` where x1, x2 are the first and second halves of each row of `a`; "
                "rows become half as long")
        args = "    a: input (f32/f16) with an even row length, contiguous in dims >= 1.\n"
    return C.finish(builder, f"Gated linear unit: {what}.\n\nArgs:\n    {CTX_DOC}\n{args}", name, __name__)


for _kind, _act in _GLU_ACT.items():
    _code = GLU_OPS[_kind]
    _export(_glu_fixed(_kind, _act, _code, "plain"))
    _export(_glu_fixed(_kind + "_swapped", _act, _code, "swapped"))
    _export(_glu_fixed(_kind + "_split", _act, _code, "split"))


@_export
def glu(ctx, a, op, swapped):
    """Gated linear unit `op` over the halves of each row of `a`; rows become half as long.

    Args:
        ctx: the Context the result is made in.
        a: input (f32/f16; f32 for swiglu_oai) with an even row length, contiguous in dims >= 1.
        op: `enum ggml_glu_op` value or name: reglu, geglu, swiglu, swiglu_oai, geglu_erf, geglu_quick.
        swapped: False for op(x1) * x2 (x1, x2 the first and second halves of a row), True for
            x1 * op(x2).
    """
    pa = tensor("glu", "a", a)
    code = C.enum("glu", "op", op, GLU_OPS)
    _check_glu("glu", pa, None, code)
    return make(ctx, "glu", lib.ggml_glu, pa, code, bool(swapped))


@_export
def glu_split(ctx, a, b, op):
    """Gated linear unit `op` as `op(a) * b`.

    Args:
        ctx: the Context the result is made in.
        a: the activated operand (f32/f16; f32 for swiglu_oai), contiguous in dims >= 1.
        b: the multiplier, same shape and type as `a`.
        op: `enum ggml_glu_op` value or name: reglu, geglu, swiglu, swiglu_oai, geglu_erf, geglu_quick.
    """
    pa = tensor("glu_split", "a", a)
    pb = tensor("glu_split", "b", b)
    code = C.enum("glu_split", "op", op, GLU_OPS)
    _check_glu("glu_split", pa, pb, code)
    return make(ctx, "glu_split", lib.ggml_glu_split, pa, pb, code)


@_export
def swiglu_oai(ctx, a, b, alpha, limit):
    """OpenAI's clamped SwiGLU: x = min(a, limit), g = clamp(b, -limit, limit), x * sigmoid(alpha x) * (g + 1).

    Args:
        ctx: the Context the result is made in.
        a: the values (f32), contiguous in dims >= 1.
        b: the gates, same shape and type as `a`.
        alpha: the sigmoid's slope.
        limit: the clamp bound.
    """
    pa = tensor("swiglu_oai", "a", a)
    pb = tensor("swiglu_oai", "b", b)
    _check_glu("swiglu_oai", pa, pb, lib.GGML_GLU_OP_SWIGLU_OAI)
    return make(ctx, "swiglu_oai", lib.ggml_swiglu_oai, pa, pb, float(alpha), float(limit))
