"""Validated op builders: one function per GGML op, GGML's name without the prefix, GGML's argument order.

Every builder takes the Context the result is made in first (`ops.add(ctx, a, b)`), then GGML's
arguments: GTensors where GGML takes tensors (None for optional ones), Python numbers, enum values as
GGML's integer or a lowercase name ("max", "desc", "neox"), dtypes as a DType or its name. Shapes are
GGML's (`ne`, innermost first). Arguments are checked against the rules GGML would otherwise enforce
by aborting the process, and an exception naming the op and the shapes is raised instead: ShapeError
(a ValueError) for shapes and layouts, DTypeError (a TypeError) for dtypes and non-tensor arguments,
ArgumentError (a ValueError) for scalar and enum arguments, GGMLError for closed or full contexts.
All four are GGRADErrors. The result is a GTensor in `ctx`.

In GGML's backward ops (backward.py) the gradient comes first.

Not wrapped, on purpose (see EXCLUDED): the constructors and lookups that make no op.
"""

from typing import TYPE_CHECKING, Any, Callable

from . import _check
from ._check import ArgumentError
from . import (elementwise, glu, reduce, linalg, shape, layout, nn, conv, conv_direct, pool, backward, optim,
               special, custom)

_MODULES = (elementwise, glu, reduce, linalg, shape, layout, nn, conv, conv_direct, pool, backward, optim, special,
            custom)

# GGML functions that return a tensor from a context but build no op: use Context instead.
EXCLUDED = {
    "ggml_new_tensor": "Context.new_tensor(dtype, ne) makes leaf tensors",
    "ggml_new_tensor_1d": "Context.new_tensor(dtype, ne) makes leaf tensors",
    "ggml_new_tensor_2d": "Context.new_tensor(dtype, ne) makes leaf tensors",
    "ggml_new_tensor_3d": "Context.new_tensor(dtype, ne) makes leaf tensors",
    "ggml_new_tensor_4d": "Context.new_tensor(dtype, ne) makes leaf tensors",
    "ggml_new_f32": "writes a value into context memory (no_alloc contexts have none): new_tensor + set_data",
    "ggml_new_i32": "writes a value into context memory (no_alloc contexts have none): new_tensor + set_data",
    "ggml_get_first_tensor": "a lookup, not an op: Context.tensors()",
    "ggml_get_next_tensor": "a lookup, not an op: Context.tensors()",
    "ggml_get_tensor": "a lookup by name, not an op: Context.tensors()",
}

__all__ = []
for _m in _MODULES:
    for _name in _m.__all__:
        _obj = getattr(_m, _name)
        if callable(_obj) and not isinstance(_obj, type):
            globals()[_name] = _obj
            __all__.append(_name)
del _m, _name, _obj

BUILDERS = tuple(__all__)

if TYPE_CHECKING:   # the builders the loop above re-exports, named for type checkers (they cannot run it)
    from .elementwise import *  # noqa: F401,F403
    from .glu import *  # noqa: F401,F403
    from .reduce import *  # noqa: F401,F403
    from .linalg import *  # noqa: F401,F403
    from .shape import *  # noqa: F401,F403
    from .layout import *  # noqa: F401,F403
    from .nn import *  # noqa: F401,F403
    from .conv import *  # noqa: F401,F403
    from .conv_direct import *  # noqa: F401,F403
    from .pool import *  # noqa: F401,F403
    from .backward import *  # noqa: F401,F403
    from .optim import *  # noqa: F401,F403
    from .special import *  # noqa: F401,F403
    from .custom import *  # noqa: F401,F403

    def __getattr__(name: str) -> Callable[..., Any]:
        """The builders made from tables (elementwise's unary ops, ...), which no import above names."""
