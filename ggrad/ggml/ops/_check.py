"""Shared machinery of the op builders: argument checks, GGML's shape predicates, error messages.

Every builder validates its arguments and then calls `make(ctx, op, fn, *args)`, which checks the
context has room, records the op for the abort hook and wraps GGML's result. The success path is
cheap on purpose (builders run ~1000 times per training step): identity type checks, integer
comparisons and GGML's own C predicates (`ggml_can_repeat`, `ggml_is_contiguous`, ...). Messages,
which read every dimension, are only built once something is wrong.

Dtype rules follow the CPU backend: it is the fallback for every op, so a type it cannot compute
would abort the process at compute time.
"""

import threading

from .._lib import ffi, lib
from .. import dtypes, hooks
from ..context import Context, GTensor
from ..errors import ArgumentError, DTypeError, GGMLError, ShapeError  # noqa: F401 (re-exported)

F32 = lib.GGML_TYPE_F32
F16 = lib.GGML_TYPE_F16
BF16 = lib.GGML_TYPE_BF16
I8 = lib.GGML_TYPE_I8
I16 = lib.GGML_TYPE_I16
I32 = lib.GGML_TYPE_I32
I64 = lib.GGML_TYPE_I64

ONLY_F32 = frozenset({F32})
F32_F16 = frozenset({F32, F16})
FLOATS = frozenset({F32, F16, BF16})
INDEX = frozenset({I32, I64})
_QUANTIZED = frozenset(d.value for d in dtypes.all_dtypes() if d.is_quantized)
_MEM_ALIGN = lib.GGML_MEM_ALIGN
_TYPE_VALUES = frozenset(d.value for d in dtypes.all_dtypes())
TYPE_SIZE = {v: lib.ggml_type_size(v) for v in _TYPE_VALUES}
MAX_SRC = lib.GGML_MAX_SRC

__all__ = []  # nothing here is a builder




# ----------------------------------------------------------------------------------------------------
# messages

def ne(p):
    """The 4 GGML dimensions of a tensor pointer, as a list (for messages)."""
    n = p.ne
    return [n[0], n[1], n[2], n[3]]


def tname(p_or_type):
    value = p_or_type if isinstance(p_or_type, int) else p_or_type.type
    return dtypes.from_value(value).name


def _names(types):
    return ", ".join(sorted(dtypes.from_value(t).name for t in types))


def fail(op, text):
    raise ShapeError(f"{op}: {text}")


def bad_type(op, name, p, allowed):
    raise DTypeError(f"{op}: {name} has type {tname(p)}, expected {_names(allowed)}")


# ----------------------------------------------------------------------------------------------------
# arguments

def tensor(op, name, x):
    """The `struct ggml_tensor *` of GTensor `x`, after checking it is one and that it is alive."""
    if x.__class__ is not GTensor and not isinstance(x, GTensor):
        raise DTypeError(f"{op}: {name} must be a GTensor, got {type(x).__name__}")
    c = x.ctx
    if c is not None and c.ptr is None:
        raise GGMLError(f"{op}: {name} belongs to a Context that was closed")
    return x.ptr


def optional(op, name, x):
    """Like `tensor`, but None gives NULL."""
    if x is None:
        return ffi.NULL
    return tensor(op, name, x)


def tensors(op, name, xs):
    """A list of tensor pointers from a sequence of GTensors."""
    if isinstance(xs, GTensor) or not hasattr(xs, "__len__"):
        raise DTypeError(f"{op}: {name} must be a sequence of GTensors, got {type(xs).__name__}")
    return [tensor(op, f"{name}[{i}]", x) for i, x in enumerate(xs)]


def types(op, name, p, allowed):
    if p.type not in allowed:
        bad_type(op, name, p, allowed)


def float_or_quant(op, name, p):
    t = p.type
    if t not in FLOATS and t not in _QUANTIZED:
        raise DTypeError(f"{op}: {name} has type {tname(p)}, expected a float or quantized type")


def not_quantized(op, name, p):
    if p.type in _QUANTIZED:
        raise DTypeError(f"{op}: {name} has quantized type {tname(p)}, which this op does not accept")


def is_quantized(t):
    return t in _QUANTIZED


def dtype(op, name, x):
    """The `enum ggml_type` value of a DType, a type name or GGML's integer."""
    try:
        if isinstance(x, int) and not isinstance(x, bool):
            if x not in _TYPE_VALUES:
                raise DTypeError(f"{x} is not a GGML type value")
            return x
        return dtypes.as_dtype(x).value
    except DTypeError as exc:
        raise DTypeError(f"{op}: {name}: {exc}") from None


def enum(op, name, value, table):
    """The integer of an enum argument given as GGML's integer or a lowercase name from `table`."""
    if isinstance(value, str):
        key = value.lower()
        if key in table:
            return table[key]
        raise ArgumentError(f"{op}: {name} must be one of {sorted(table)}, got {value!r}")
    if isinstance(value, bool) or not isinstance(value, int) or value not in table.values():
        raise ArgumentError(f"{op}: {name} must be one of {sorted(table)} (or their GGML values "
                         f"{sorted(table.values())}), got {value!r}")
    return value


def integer(op, name, value, lo=None, hi=None):
    """An int argument in [lo, hi] (either bound optional)."""
    if value.__class__ is not int:
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise DTypeError(f"{op}: {name} must be an int, got {type(value).__name__}")
        value = value.__index__()
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        span = f">= {lo}" if hi is None else (f"<= {hi}" if lo is None else f"in [{lo}, {hi}]")
        raise ArgumentError(f"{op}: {name} must be {span}, got {value}")
    return value


def ints(op, name, values, n):
    """A sequence of exactly `n` ints."""
    try:
        out = [integer(op, name, v) for v in values]
    except TypeError:
        raise DTypeError(f"{op}: {name} must be a sequence of {n} ints, got {type(values).__name__}") from None
    if len(out) != n:
        raise ArgumentError(f"{op}: {name} must have {n} values, got {len(out)}")
    return out


def dims(op, values):
    """New GGML dimensions: non-negative ints (returned as a tuple of Python ints)."""
    for v in values:
        if v.__class__ is not int or v < 0:
            return tuple(integer(op, f"ne{i}", v, lo=0) for i, v in enumerate(values))
    return tuple(values)


# ----------------------------------------------------------------------------------------------------
# GGML's predicates (those that are static inline in ggml.c are re-implemented here)

def contiguous(op, name, p):
    if not lib.ggml_is_contiguous(p):
        fail(op, f"{name} (ne={ne(p)}, nb={list(p.nb)}) must be contiguous; make it so with ops.cont")


def contiguous_rows(op, name, p):
    if p.nb[0] != TYPE_SIZE[p.type] and not lib.ggml_is_contiguous_rows(p):
        fail(op, f"{name} (ne={ne(p)}, nb={list(p.nb)}) must have contiguous rows (nb[0] = element size)")


def contiguous_1(op, name, p):
    if not lib.ggml_is_contiguous_1(p):
        fail(op, f"{name} (ne={ne(p)}, nb={list(p.nb)}) must be contiguous in dims >= 1 with contiguous rows")


def padded_1d(op, name, p):
    nb = p.nb
    n = p.ne
    if nb[0] != lib.ggml_type_size(p.type) or nb[2] != nb[1] * n[1] or nb[3] != nb[2] * n[2]:
        fail(op, f"{name} (ne={ne(p)}, nb={list(nb)}) must be contiguous except for row padding")


def can_repeat(op, small, big, what="b", into="a"):
    """GGML's ggml_can_repeat(small, big): `big` is a tiling of `small`."""
    if not lib.ggml_can_repeat(small, big):
        fail(op, f"{what} ne={ne(small)} cannot be broadcast to {into} ne={ne(big)} "
                 f"(each of {into}'s dimensions must be a multiple of {what}'s)")


def same_shape(op, p, q, pn="a", qn="b"):
    if not lib.ggml_are_same_shape(p, q):
        fail(op, f"{pn} ne={ne(p)} and {qn} ne={ne(q)} must have the same shape")


def not_transposed(op, name, p):
    if p.nb[0] > p.nb[1]:
        fail(op, f"{name} (ne={ne(p)}, nb={list(p.nb)}) must not be transposed; make it contiguous with ops.cont")


def divides(small, big):
    """big % small == 0, with GGML's SIGFPE on small == 0 turned into False."""
    return small != 0 and big % small == 0


def block_multiple(op, type_value, ne0, what="ne0"):
    if type_value not in _QUANTIZED:
        return
    blk = lib.ggml_blck_size(type_value)
    if blk > 1 and ne0 % blk:
        fail(op, f"{what}={ne0} is not a multiple of {tname(type_value)}'s block size {blk}")


def nelements(p):
    n = p.ne
    return n[0] * n[1] * n[2] * n[3]


def nbytes(p):
    return lib.ggml_nbytes(p)


def view_fits(op, p, new_ne, new_nb, offset):
    """A view of `p` with dimensions `new_ne` (4), strides `new_nb` (nb1..nb3) and byte `offset` must lie
    inside the memory of p's base tensor, both as GGML checks it (as if the view were contiguous)
    and through its strides. Returns the offset as an int."""
    n0, n1, n2, n3 = new_ne
    s1, s2, s3 = new_nb
    if not (offset.__class__ is int and s1.__class__ is int and s2.__class__ is int and s3.__class__ is int
            and offset >= 0 and s1 >= 0 and s2 >= 0 and s3 >= 0):
        offset = integer(op, "offset", offset, lo=0)
        s1, s2, s3 = (integer(op, f"nb{i + 1}", v, lo=0) for i, v in enumerate(new_nb))
    t = p.type
    if t in _QUANTIZED:
        block_multiple(op, t, n0)
        row = TYPE_SIZE[t] * (n0 // lib.ggml_blck_size(t))
    else:
        row = TYPE_SIZE[t] * n0
    if not (n0 and n1 and n2 and n3):
        return offset
    size = row * n1 * n2 * n3
    extent = row + (n1 - 1) * s1 + (n2 - 1) * s2 + (n3 - 1) * s3
    offs = offset
    base = p
    if p.view_src != ffi.NULL:
        base = p.view_src
        offs += p.view_offs
    limit = lib.ggml_nbytes(base)
    if offs + size > limit or offs + extent > limit:
        fail(op, f"a view ne={list(new_ne)} nb1..3={list(new_nb)} at offset {offset} reaches past the end "
                 f"of a (ne={ne(p)}, nb={list(p.nb)}; its memory holds {limit - offs + offset} bytes from a's start)")
    return offset


# ----------------------------------------------------------------------------------------------------
# building

def context(op, ctx):
    """The live `ggml_context *` of a Context (no room check)."""
    if ctx.__class__ is not Context and not isinstance(ctx, Context):
        raise DTypeError(f"{op}: ctx must be a Context, got {type(ctx).__name__}")
    if ctx.ptr is None:
        raise GGMLError(f"{op}: ctx was closed")
    return ctx.ptr


def make(ctx, op, fn, *args):
    """Call the GGML builder `fn(ctx_ptr, *args)` once the context is known to have room for it."""
    if ctx.__class__ is not Context and not isinstance(ctx, Context):
        raise DTypeError(f"{op}: ctx must be a Context, got {type(ctx).__name__}")
    if ctx.ptr is None:
        raise GGMLError(f"{op}: ctx was closed")
    hooks.set_current_op(op)
    if ctx.no_alloc:
        cp = ctx.check_room(op)
    else:
        cp = ctx.check_room(op, _probe_bytes(fn, args))
    return GTensor(fn(cp, *args), ctx)


_local = threading.local()  # scratch contexts, one per thread


def scratch():
    """A metadata-only Context of this thread for trial builds, emptied (ggml_reset) before use."""
    c = getattr(_local, "ctx", None)
    if c is None:
        c = _local.ctx = Context(n_tensors=32)
    lib.ggml_reset(c.ptr)
    return c


def _probe_bytes(fn, args):
    """Bytes of tensor data `fn` would allocate: it is run once in the scratch context."""
    p = scratch().ptr
    fn(p, *args)
    total = 0
    t = lib.ggml_get_first_tensor(p)
    while t != ffi.NULL:
        if t.view_src == ffi.NULL:
            total += -(-lib.ggml_nbytes(t) // _MEM_ALIGN) * _MEM_ALIGN + _MEM_ALIGN
        t = lib.ggml_get_next_tensor(p, t)
    lib.ggml_reset(p)
    return total


def finish(fn, doc, name, module):
    """Give a generated builder its real name and docstring."""
    fn.__name__ = name
    fn.__qualname__ = name
    fn.__doc__ = doc
    fn.__module__ = module
    return fn


CTX_DOC = "ctx: the Context the result is made in."
