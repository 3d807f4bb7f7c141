"""The public API's argument boundary: bad arguments raise PyTorch's exception types, naming the op.

PyTorch raises TypeError naming the function when an argument is of the wrong kind (a None, a str or a list
of str where a Tensor goes, a str where a dim goes). ggrad's ops read `.dtype` or `.ndim` of their inputs
first, so such an argument surfaces somewhere inside (an AttributeError, `int("abc")`'s ValueError).
`typed` wraps the public functions and Tensor methods: when a call fails, the argument-kind table
(arguments.py) replays PyTorch's parse and gives its error; an AttributeError raised on an object that is
not a Tensor becomes NotATensorError. The checks run on the failure path only, so a good call pays one
extra Python call. A call that failed on a complex tensor (complex_tensor.py) goes to the complex op of
its name where there is one (`ggrad.matmul(z, w)`, `ggrad.cat([z, w])`). A builtin error whose message does not name the op (raised by a shared helper or by
numpy) gets the op's name in front, so every message says which call failed.
"""

import functools
import re


from .arguments import NotATensorError, explain
from .complex_tensor import FUNCTIONS as COMPLEX_FUNCTIONS, ComplexTensor
from .tensor import Tensor

__all__ = ["NotATensorError", "typed", "guard"]


def typed(fn, name, method=False):
    """`fn` with an argument of the wrong kind reported as PyTorch reports it, a non-Tensor input as
    NotATensorError, and every error message naming `name`. A `method`'s first argument is self."""

    @functools.wraps(fn)
    def op(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (AttributeError, TypeError, ValueError, IndexError, RuntimeError, KeyError) as e:
            if name in COMPLEX_FUNCTIONS and _complex_among(args, kwargs):
                return COMPLEX_FUNCTIONS[name](*args, **kwargs)
            torchs = explain(fn, name, args, kwargs, method)
            if torchs is not None:
                raise torchs from None
            _translate(e, name, args, kwargs)
            raise

    op.__wrapped_op__ = fn
    return op


def _complex_among(args, kwargs):
    """Whether a complex tensor is among the arguments (or in a list or tuple of them, as cat's)."""
    for v in (*args, *kwargs.values()):
        if isinstance(v, ComplexTensor) or (isinstance(v, (list, tuple)) and any(isinstance(x, ComplexTensor)
                                                                                 for x in v)):
            return True
    return False


def _translate(e, name, args, kwargs):
    """Raise NotATensorError for an AttributeError on a non-Tensor argument (or a TypeError saying no Tensor
    was given); otherwise name the op in `e`'s message (the caller re-raises it)."""
    if isinstance(e, AttributeError):
        culprit = getattr(e, "obj", None)
        if not _given(culprit, (*args, *kwargs.values())) or isinstance(culprit, Tensor) or e.name is None:
            return   # not one of the call's arguments: an error inside the op, reported as it is
        raise NotATensorError(f"{name}(): expected a Tensor argument, got {type(culprit).__name__} "
                              f"{culprit!r:.60} (it has no .{e.name})") from None
    if type(e) is TypeError and args and not isinstance(args[0], Tensor) and "expected at least one Tensor" in str(e):
        raise NotATensorError(f"{name}(): expected a Tensor argument, got {type(args[0]).__name__} "
                              f"{args[0]!r:.60}") from None
    _rename(e, name)


def _given(obj, values):
    """Whether `obj` came from the call: one of its arguments, an element of a list or tuple argument, or
    a piece of a str argument read as a sequence (cat("ab"))."""
    for v in values:
        if obj is v or (isinstance(v, (list, tuple)) and any(obj is e for e in v)) or \
                (isinstance(v, str) and isinstance(obj, str)):
            return True
    return False


def _rename(error, name):
    """Put `name` in front of `error`'s message when the message does not name it (a shared helper or numpy
    raised it): the error keeps its type and traceback."""
    if len(error.args) == 1 and isinstance(error.args[0], str) and \
            not re.search(rf"\b{re.escape(name)}\b", error.args[0]):
        error.args = (f"{name}(): {error.args[0]}",)


def guard(namespace, names, prefix=""):
    """Replace each function `names` in the module dict `namespace` by its `typed` form (once). The typed
    form is named where it lives (`ggrad.nn.functional.relu`), so pickle finds it there: a module holding
    `F.relu` saves as PyTorch's does."""
    for name in names:
        fn = namespace.get(name)
        if callable(fn) and not isinstance(fn, type) and not hasattr(fn, "__wrapped_op__"):
            op = typed(fn, prefix + name)
            op.__module__, op.__qualname__ = namespace["__name__"], name
            namespace[name] = op
