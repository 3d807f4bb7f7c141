"""Custom operators: GGML calls a function (C, or Python through a cffi callback) to compute the node.

`fun` may be a cffi function pointer of GGML's type (`ggml_custom1_op_t`, ...), passed through with
`userdata` (a cdata pointer or None), or a Python callable. A Python callable receives GTensors
instead of pointers and the Python object `userdata`:

    custom1:  fun(dst, a, ith, nth, userdata)
    custom2:  fun(dst, a, b, ith, nth, userdata)
    custom3:  fun(dst, a, b, c, ith, nth, userdata)
    custom:   fun(dst, ith, nth, userdata)         (the inputs are dst.src(0), dst.src(1), ...)

A Python callable runs on `n_tasks` threads at once (ith = 0..nth-1 with nth = n_tasks, or all of
GGML's threads for -1); use n_tasks=1 unless the function splits its work by ith. (GGML 0.20.2's CPU
backend calls custom ops on every thread whatever n_tasks says; the Python wrapper skips the
threads with ith >= n_tasks. A C `fun` is called on every thread.) An exception raised in it is kept and re-raised by the Scheduler once the compute
returns (`hooks.raise_pending`). The callback lives as long as the Context the node was built in.
"""

import inspect
import weakref

from .._lib import ffi, lib
from .. import hooks
from ..context import GTensor
from . import _check as C
from ._check import make, tensor

__all__ = ["map_custom1", "map_custom1_inplace", "map_custom2", "map_custom2_inplace", "map_custom3",
           "map_custom3_inplace", "custom_4d", "custom_inplace"]

_alive = weakref.WeakKeyDictionary()  # Context -> callbacks its nodes point to
_N_TASKS_MAX = lib.GGML_N_TASKS_MAX
_CTYPES = {1: "ggml_custom1_op_t", 2: "ggml_custom2_op_t", 3: "ggml_custom3_op_t", 0: "ggml_custom_op_t"}


def _store(exc):
    hooks.store_exception(exc)


def _callback(op, ctx, fun, userdata, n_inputs, n_tasks):
    """(C function pointer, C userdata) for `fun`."""
    ctype = _CTYPES[n_inputs]
    if isinstance(fun, ffi.CData):
        if ffi.typeof(fun) is not ffi.typeof(ctype):
            raise C.DTypeError(f"{op}: fun is a {ffi.typeof(fun).cname}, expected {ctype}")
        if userdata is None:
            return fun, ffi.NULL
        if not isinstance(userdata, ffi.CData):
            raise C.DTypeError(f"{op}: with a C function, userdata must be a cdata pointer or None")
        return fun, ffi.cast("void *", userdata)
    if not callable(fun):
        raise C.DTypeError(f"{op}: fun must be a Python callable or a {ctype} function pointer, got "
                           f"{type(fun).__name__}")

    def trampoline(dst, *rest):
        try:
            ith, nth = rest[n_inputs], rest[n_inputs + 1]
            if n_tasks != _N_TASKS_MAX:
                nth = min(nth, n_tasks)
                if ith >= nth:
                    return
            tensors = [GTensor(p, None) for p in rest[:n_inputs]]
            fun(GTensor(dst, None), *tensors, ith, nth, userdata)
        except BaseException as exc:  # kept for the Scheduler to re-raise after compute
            _store(exc)

    cb = ffi.callback(ctype, trampoline)
    _alive.setdefault(ctx, []).append(cb)
    return cb, ffi.NULL


def _n_tasks(op, n_tasks):
    n = C.integer(op, "n_tasks", n_tasks)
    if n != _N_TASKS_MAX and n <= 0:
        raise C.ArgumentError(f"{op}: n_tasks must be > 0 or GGML_N_TASKS_MAX (-1), got {n}")
    return n


def _map(name, n_inputs, inplace):
    fn = getattr(lib, "ggml_" + name)
    names = ["a", "b", "c"][:n_inputs]

    def builder(ctx, *args):
        if len(args) not in (n_inputs + 2, n_inputs + 3):
            raise TypeError(f"{name}() takes ctx, {', '.join(names)}, fun, n_tasks[, userdata]")
        ptrs = [tensor(name, n, x) for n, x in zip(names, args[:n_inputs])]
        fun, n_tasks = args[n_inputs], args[n_inputs + 1]
        userdata = args[n_inputs + 2] if len(args) > n_inputs + 2 else None
        n = _n_tasks(name, n_tasks)
        C.context(name, ctx)
        cb, ud = _callback(name, ctx, fun, userdata, n_inputs, n)
        return make(ctx, name, fn, *ptrs, cb, n, ud)

    tensors_doc = "".join(f"\n    {n}: input tensor {i}{' (the result has its shape and type)' if i == 0 else ''}."
                          for i, n in enumerate(names))
    note = "\n\nIn place: the result is a view of `a`." if inplace else ""
    doc = (f"A node computed by `fun` from {n_inputs} input(s); the result has a's shape and type.{note}\n\n"
           f"See the module docstring for how `fun` is called.\n\n"
           f"Args:\n    {C.CTX_DOC}{tensors_doc}\n    fun: a Python callable or a {_CTYPES[n_inputs]} pointer.\n"
           f"    n_tasks: threads GGML runs it on (> 0, or -1 for all).\n"
           f"    userdata: passed to fun (a Python object, or a cdata pointer for a C fun). Optional.\n")
    builder = C.finish(builder, doc, name, __name__)
    P = inspect.Parameter
    builder.__signature__ = inspect.Signature(
        [P(p, P.POSITIONAL_OR_KEYWORD) for p in ["ctx"] + names + ["fun", "n_tasks"]]
        + [P("userdata", P.POSITIONAL_OR_KEYWORD, default=None)])
    return builder


for _n in (1, 2, 3):
    for _inplace in (False, True):
        _b = _map(f"map_custom{_n}{'_inplace' if _inplace else ''}", _n, _inplace)
        globals()[_b.__name__] = _b


def _args(op, args, n_args, limit):
    ptrs = C.tensors(op, "args", args)
    if n_args is None:
        n_args = len(ptrs)
    C.integer(op, "n_args", n_args, 0, limit)
    if n_args != len(ptrs):
        raise C.ArgumentError(f"{op}: n_args={n_args} but {len(ptrs)} tensors given")
    return ffi.new("struct ggml_tensor *[]", ptrs or [ffi.NULL]), n_args


def custom_4d(ctx, type, ne0, ne1, ne2, ne3, args, n_args, fun, n_tasks, userdata=None):
    """A new tensor of `type` and shape [ne0, ne1, ne2, ne3] computed by `fun` from the tensors `args`.

    Args:
        ctx: the Context the result is made in.
        type: the result's dtype (DType or name).
        ne0: size of dimension 0.
        ne1: size of dimension 1.
        ne2: size of dimension 2.
        ne3: size of dimension 3.
        args: the input tensors (at most GGML_MAX_SRC - 1 = 9); fun finds them as dst.src(i).
        n_args: len(args) (None for that).
        fun: a Python callable fun(dst, ith, nth, userdata) or a ggml_custom_op_t pointer.
        n_tasks: threads GGML runs it on (> 0, or -1 for all).
        userdata: passed to fun (a Python object, or a cdata pointer for a C fun).
    """
    op = "custom_4d"
    tv = C.dtype(op, "type", type)
    C.dims(op, (ne0, ne1, ne2, ne3))
    C.block_multiple(op, tv, ne0)
    arr, n = _args(op, args, n_args, C.MAX_SRC - 1)
    nt = _n_tasks(op, n_tasks)
    C.context(op, ctx)
    cb, ud = _callback(op, ctx, fun, userdata, 0, nt)
    return make(ctx, op, lib.ggml_custom_4d, tv, ne0, ne1, ne2, ne3, arr, n, cb, nt, ud)


def custom_inplace(ctx, a, args, n_args, fun, n_tasks, userdata=None):
    """A view of `a` computed by `fun` (which overwrites a's memory) from `a` and the tensors `args`.

    Args:
        ctx: the Context the result is made in.
        a: the tensor overwritten; fun finds it as dst.src(0).
        args: further inputs (at most GGML_MAX_SRC - 2 = 8), dst.src(1), dst.src(2), ...
        n_args: len(args) (None for that).
        fun: a Python callable fun(dst, ith, nth, userdata) or a ggml_custom_op_t pointer.
        n_tasks: threads GGML runs it on (> 0, or -1 for all).
        userdata: passed to fun (a Python object, or a cdata pointer for a C fun).
    """
    op = "custom_inplace"
    pa = tensor(op, "a", a)
    arr, n = _args(op, args, n_args, C.MAX_SRC - 2)
    nt = _n_tasks(op, n_tasks)
    C.context(op, ctx)
    cb, ud = _callback(op, ctx, fun, userdata, 0, nt)
    return make(ctx, op, lib.ggml_custom_inplace, pa, arr, n, cb, nt, ud)
