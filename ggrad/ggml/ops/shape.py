"""Views, reshapes, permutations, copies and casts.

Views (`view_*`, `reshape*`, `permute`, `transpose`, `view_tensor`) share the source's memory; a
view must stay inside the source's memory, and reshapes need a contiguous source.
"""

import inspect

from .._lib import lib
from . import _check as C
from ._check import make, tensor, CTX_DOC

__all__ = ["dup_tensor", "view_tensor", "reshape", "permute", "transpose", "cont", "cpy", "cast"]


def _export(fn):
    globals()[fn.__name__] = fn
    __all__.append(fn.__name__)
    return fn


def dup_tensor(ctx, a):
    """A new leaf tensor with a's type and shape (no data, no op; like numpy's empty_like).

    Args:
        ctx: the Context the result is made in.
        a: the tensor whose type and shape are copied.
    """
    return make(ctx, "dup_tensor", lib.ggml_dup_tensor, tensor("dup_tensor", "a", a))


def view_tensor(ctx, a):
    """A view of all of `a` (same type, shape and strides).

    Args:
        ctx: the Context the result is made in.
        a: the tensor to view.
    """
    return make(ctx, "view_tensor", lib.ggml_view_tensor, tensor("view_tensor", "a", a))


def _reshape_checks(op, pa, new_ne):
    """The new dimensions as Python ints, once `a` is known to be reshapeable to them."""
    new_ne = C.dims(op, new_ne)
    if not lib.ggml_is_contiguous(pa):
        C.fail(op, f"a (ne={C.ne(pa)}, nb={list(pa.nb)}) must be contiguous; use ops.cont or ops.cont_{len(new_ne)}d")
    n = 1
    for v in new_ne:
        n *= v
    if n != lib.ggml_nelements(pa):
        C.fail(op, f"cannot reshape a ne={C.ne(pa)} ({C.nelements(pa)} elements) to ne={list(new_ne)} "
                   f"({n} elements)")
    C.block_multiple(op, pa.type, new_ne[0])
    return new_ne


def reshape(ctx, a, b):
    """A view of `a` with b's shape (only b's shape is used; b may be non-contiguous).

    Args:
        ctx: the Context the result is made in.
        a: contiguous tensor to reshape.
        b: tensor with the new shape and a's number of elements.
    """
    pa = tensor("reshape", "a", a)
    pb = tensor("reshape", "b", b)
    _reshape_checks("reshape", pa, C.ne(pb))
    return make(ctx, "reshape", lib.ggml_reshape, pa, pb)


def _reshape_nd(n):
    name = f"reshape_{n}d"
    fn = getattr(lib, "ggml_" + name)
    names = [f"ne{i}" for i in range(n)]

    def builder(ctx, a, *ne):
        if len(ne) != n:
            raise TypeError(f"{name}() takes ctx, a and {n} dimensions ({', '.join(names)}), got {len(ne)}")
        pa = tensor(name, "a", a)
        return make(ctx, name, fn, pa, *_reshape_checks(name, pa, ne))

    dims = "".join(f"\n    {v}: size of dimension {i} (GGML order, innermost first)." for i, v in enumerate(names))
    doc = (f"A {n}-D view of the contiguous tensor `a` with dimensions {', '.join(names)}.\n\n"
           f"Args:\n    {CTX_DOC}\n    a: contiguous tensor.{dims}\n")
    builder = C.finish(builder, doc, name, __name__)
    return _with_signature(builder, ["ctx", "a"] + names)


def _with_signature(fn, params):
    fn.__signature__ = inspect.Signature([inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                                          for p in params])
    return fn


def _view_nd(n):
    name = f"view_{n}d"
    fn = getattr(lib, "ggml_" + name)
    nes = [f"ne{i}" for i in range(n)]
    nbs = [f"nb{i}" for i in range(1, n)]

    def builder(ctx, a, *args):
        if len(args) != 2 * n:
            raise TypeError(f"{name}() takes ctx, a, {', '.join(nes + nbs)}, offset; got {len(args)} after a")
        pa = tensor(name, "a", a)
        ne = C.dims(name, args[:n])
        strides = args[n:2 * n - 1]
        if n == 1:
            full_ne = (ne[0], 1, 1, 1)
            full_nb = (0, 0, 0)
        elif n == 2:
            full_ne = (ne[0], ne[1], 1, 1)
            full_nb = (strides[0], 0, 0)
        elif n == 3:
            full_ne = (ne[0], ne[1], ne[2], 1)
            full_nb = (strides[0], strides[1], 0)
        else:
            full_ne = ne
            full_nb = strides
        offset = C.view_fits(name, pa, full_ne, full_nb, args[-1])
        return make(ctx, name, fn, pa, *ne, *strides, offset)

    dims = "".join(f"\n    {v}: size of dimension {i}." for i, v in enumerate(nes))
    strides = "".join(f"\n    {v}: stride of dimension {i + 1} in bytes." for i, v in enumerate(nbs))
    doc = (f"A {n}-D view into the memory of `a` (shares it; nothing is copied).\n\n"
           f"The view must lie inside a's memory (its base tensor's, if `a` is itself a view).\n\n"
           f"Args:\n    {CTX_DOC}\n    a: the tensor viewed.{dims}{strides}\n"
           f"    offset: byte offset of the view's first element from the start of `a`.\n")
    builder = C.finish(builder, doc, name, __name__)
    return _with_signature(builder, ["ctx", "a"] + nes + nbs + ["offset"])


def _cont_nd(n):
    name = f"cont_{n}d"
    fn = getattr(lib, "ggml_" + name)
    names = [f"ne{i}" for i in range(n)]

    def builder(ctx, a, *ne):
        if len(ne) != n:
            raise TypeError(f"{name}() takes ctx, a and {n} dimensions ({', '.join(names)}), got {len(ne)}")
        pa = tensor(name, "a", a)
        ne = C.dims(name, ne)
        total = 1
        for v in ne:
            total *= v
        if total != C.nelements(pa):
            C.fail(name, f"a ne={C.ne(pa)} has {C.nelements(pa)} elements, ne={list(ne)} has {total}")
        C.block_multiple(name, pa.type, ne[0])
        return make(ctx, name, fn, pa, *ne)

    dims = "".join(f"\n    {v}: size of dimension {i}." for i, v in enumerate(names))
    doc = (f"A contiguous copy of `a` (any layout) with the {n}-D shape {', '.join(names)}.\n\n"
           f"Args:\n    {CTX_DOC}\n    a: the tensor copied (element order: GGML's, innermost first).{dims}\n")
    builder = C.finish(builder, doc, name, __name__)
    return _with_signature(builder, ["ctx", "a"] + names)


for _n in (1, 2, 3, 4):
    _export(_reshape_nd(_n))
    _export(_view_nd(_n))
    _export(_cont_nd(_n))


def permute(ctx, a, axis0, axis1, axis2, axis3):
    """A view of `a` with its dimensions permuted: dimension i of `a` becomes dimension axis_i.

    Note the direction (GGML's): it is the inverse of numpy's `transpose(axes)` argument.

    Args:
        ctx: the Context the result is made in.
        a: the tensor viewed.
        axis0: where a's dimension 0 goes (0..3).
        axis1: where a's dimension 1 goes.
        axis2: where a's dimension 2 goes.
        axis3: where a's dimension 3 goes.
    """
    pa = tensor("permute", "a", a)
    ok = False
    if axis0.__class__ is int and axis1.__class__ is int and axis2.__class__ is int and axis3.__class__ is int:
        ok = 0 <= min(axis0, axis1, axis2, axis3) and (1 << axis0 | 1 << axis1 | 1 << axis2 | 1 << axis3) == 15
    if not ok:
        axes = [C.integer("permute", f"axis{i}", v) for i, v in enumerate((axis0, axis1, axis2, axis3))]
        if sorted(axes) != [0, 1, 2, 3]:
            C.fail("permute", f"axes {axes} are not a permutation of [0, 1, 2, 3] (a ne={C.ne(pa)})")
        axis0, axis1, axis2, axis3 = axes
    return make(ctx, "permute", lib.ggml_permute, pa, axis0, axis1, axis2, axis3)


def transpose(ctx, a):
    """A view of `a` with dimensions 0 and 1 swapped (permute 1, 0, 2, 3).

    Args:
        ctx: the Context the result is made in.
        a: the tensor viewed.
    """
    return make(ctx, "transpose", lib.ggml_transpose, tensor("transpose", "a", a))


def cont(ctx, a):
    """A contiguous copy of `a` with the same shape (makes views and permutations contiguous).

    Args:
        ctx: the Context the result is made in.
        a: the tensor copied.
    """
    pa = tensor("cont", "a", a)
    _copy_types("cont", pa, pa.type, None)
    return make(ctx, "cont", lib.ggml_cont, pa)


# Quantized types without a quantize-row function on the CPU (they need an importance matrix).
_NO_FROM_FLOAT = frozenset(getattr(lib, "GGML_TYPE_" + n) for n in
                           ("IQ3_XXS", "IQ3_S", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ1_S", "IQ1_M"))


def _copy_types(op, pa, td, pd):
    """The CPU copies (dup) between these types only; pd is the destination tensor, if it exists."""
    ts = pa.type
    if C.is_quantized(ts) and pa.nb[0] != C.TYPE_SIZE[ts]:   # GGML would size rows of ne[0] / block values
        C.fail(op, f"a is a {C.tname(ts)} view (ne={C.ne(pa)}, nb={list(pa.nb)}) whose blocks do not run along "
                   "its dimension 0 (transposed or permuted): its values cannot be copied apart from its blocks; "
                   "dequantize it first")
    if ts == td:
        return
    ok = False
    if ts in C.FLOATS:
        if td in C.FLOATS or (ts == C.F32 and td == C.I32):
            ok = True
        elif C.is_quantized(td) and td not in _NO_FROM_FLOAT:
            if pa.nb[0] != lib.ggml_type_size(ts) or (pd is not None and not lib.ggml_is_contiguous(pd)):
                C.fail(op, f"quantizing to {C.tname(td)} needs a with contiguous rows and a contiguous destination")
            C.block_multiple(op, td, pa.ne[0], "a.ne[0]")
            ok = True
    elif ts == C.I32:
        ok = td == C.F32
    elif C.is_quantized(ts):
        ok = td == C.F32
    if not ok:
        raise C.DTypeError(f"{op}: cannot convert {C.tname(ts)} to {C.tname(td)} (supported: between f32/f16/bf16, "
                           "f32 <-> i32, f32/f16/bf16 -> quantized, quantized -> f32)")


def cpy(ctx, a, b):
    """Copy `a` into `b` (converting a's type to b's); the result is a view of `b`.

    Args:
        ctx: the Context the result is made in.
        a: the source, any shape with b's number of elements (copied in GGML element order).
        b: the destination; computing the result writes into b's memory.
    """
    pa = tensor("cpy", "a", a)
    pb = tensor("cpy", "b", b)
    if C.nelements(pa) != C.nelements(pb):
        C.fail("cpy", f"a ne={C.ne(pa)} ({C.nelements(pa)} elements) and b ne={C.ne(pb)} "
                      f"({C.nelements(pb)} elements) differ in size")
    _copy_types("cpy", pa, pb.type, pb)
    return make(ctx, "cpy", lib.ggml_cpy, pa, pb)


def cast(ctx, a, type):
    """A copy of `a` converted to `type` (f32 -> i32 truncates towards zero).

    Args:
        ctx: the Context the result is made in.
        a: the source.
        type: the result's dtype (DType or name): between f32/f16/bf16, f32 <-> i32, to a quantized type
            from f32/f16/bf16, or from a quantized type to f32.
    """
    pa = tensor("cast", "a", a)
    tv = C.dtype("cast", "type", type)
    C.block_multiple("cast", tv, pa.ne[0], "a.ne[0]")
    _copy_types("cast", pa, tv, None)
    return make(ctx, "cast", lib.ggml_cast, pa, tv)
