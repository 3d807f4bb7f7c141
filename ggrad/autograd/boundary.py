"""The public functional API's argument boundary: a non-Tensor where a Tensor goes raises TypeError.

PyTorch raises TypeError naming the function when an argument that must be a Tensor is None, a str or a
list of str. ggrad's ops read `.dtype` or `.ndim` of their inputs first, so such an argument surfaces as an
AttributeError somewhere inside. `guard` wraps the public functions so that exactly that AttributeError (one
raised on an object that is not a Tensor) becomes PyTorch's TypeError naming the op; the check runs on the
failure path only, so a good call pays one extra Python call. A builtin error whose message does not name the
op (raised by a shared helper or by numpy) gets the op's name in front, so every message says which call failed.
"""

import functools
import re


from ..ggml.errors import GGRADError
from .tensor import Tensor


class NotATensorError(GGRADError, TypeError, AttributeError):
    """A non-Tensor where a Tensor goes: PyTorch raises TypeError from its C++ ops and AttributeError from its
    Python ones (the losses call `target.size()`), so this is both."""


def typed(fn, name):
    """`fn` with a non-Tensor input reported as NotATensorError, and every error message naming `name`."""

    @functools.wraps(fn)
    def op(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AttributeError as e:
            culprit = getattr(e, "obj", None)
            if not _given(culprit, (*args, *kwargs.values())) or isinstance(culprit, Tensor) or e.name is None:
                raise   # not one of the call's arguments: an error inside the op, reported as it is
            raise NotATensorError(f"{name}(): expected a Tensor argument, got {type(culprit).__name__} "
                                  f"{culprit!r:.60} (it has no .{e.name})") from None
        except TypeError as e:
            if args and not isinstance(args[0], Tensor) and type(e) is TypeError and \
                    "expected at least one Tensor" in str(e):
                raise NotATensorError(f"{name}(): expected a Tensor argument, got {type(args[0]).__name__} "
                                      f"{args[0]!r:.60}") from None
            _rename(e, name)
            raise
        except (ValueError, IndexError, RuntimeError, KeyError) as e:
            _rename(e, name)
            raise

    op.__wrapped_op__ = fn
    return op


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
    """Replace each function `names` in the module dict `namespace` by its `typed` form (once)."""
    for name in names:
        fn = namespace.get(name)
        if callable(fn) and not isinstance(fn, type) and not hasattr(fn, "__wrapped_op__"):
            namespace[name] = typed(fn, prefix + name)
