"""What kind of value each argument of the public API takes, read only after a call has failed.

PyTorch parses every argument before it computes, so a str where a dim goes is a TypeError naming the
argument even when the op would also have failed on a shape. ggrad's ops read their arguments as they go, so
the same call fails wherever the bad value is first touched: `int("abc")` (ValueError), `bool(tensor)`
(RuntimeError), `None.shape` (AttributeError). `explain` replays PyTorch's parse on a call that already
raised: the first argument whose value is not of its kind gives PyTorch's exception (TypeError, or
IndexError for a dim out of range) naming the op and the argument. A good call never reaches this module.

Kinds are looked up by parameter name (`KINDS`), with per-op exceptions declared beside the op (`@kinds`,
gathered in `OP_KINDS`); a parameter with no kind is not checked.
"""

import inspect
import numbers
import operator

import numpy as np

from ..ggml import dtypes
from ..ggml.errors import GGRADError
from . import torch_dtypes
from .tensor import Tensor


class ArgumentTypeError(GGRADError, TypeError):
    """An argument of the wrong type, as PyTorch's parser reports it:
    "add(): argument 'other' (position 2) must be Tensor, not str"."""


class NotATensorError(ArgumentTypeError, AttributeError):
    """A non-Tensor where a Tensor goes: PyTorch raises TypeError from its C++ ops and AttributeError from its
    Python ones (the losses call `target.size()`), so this is both."""


def as_int(value, name, op):
    """`value` as an int for an op's int argument; a float or str is PyTorch's TypeError (`int(1.5)` would
    truncate it silently). Ops call this on their success path: it is one `operator.index`."""
    try:
        return operator.index(value)
    except TypeError:
        raise ArgumentTypeError(f"{op}(): argument '{name}' must be int, not {type(value).__name__}") from None


def require(op, name, value, kind):
    """Raise PyTorch's TypeError unless `value` (argument `name` of `op`) is of `kind`: the check an op makes
    on its success path where a wrong kind would not fail by itself (a flag given a str)."""
    if not kind.fits(value):
        error = NotATensorError if kind is TENSOR else ArgumentTypeError
        raise error(f"{op}(): argument '{name}' must be {kind.label}, not {type(value).__name__}")


def _is_int(v):
    return isinstance(v, (numbers.Integral, np.integer)) or (isinstance(v, Tensor) and v.ndim == 0 and
                                                              not v.dtype.is_float)


def _is_number(v):
    return isinstance(v, (numbers.Number, np.number, np.bool_)) or (isinstance(v, Tensor) and v.numel() == 1)


def _is_ints(v):
    return isinstance(v, (tuple, list)) and all(_is_int(e) and not isinstance(e, Tensor) for e in v)


def _is_dtype(v):
    return isinstance(v, dtypes.DType) or (isinstance(v, str) and (torch_dtypes.is_name(v) or dtypes.is_name(v)))


class Kind:
    """A kind of argument: `label` as PyTorch names it in messages, `fits(value)`, and whether it is a dim
    (checked against the input's rank as well)."""

    def __init__(self, label, fits, dim=False):
        self.label, self.fits, self.dim = label, fits, dim


TENSOR = Kind("Tensor", lambda v: isinstance(v, Tensor))
OPERAND = Kind("Tensor or Number", lambda v: isinstance(v, Tensor) or _is_number(v))
TENSORS = Kind("tuple of Tensors", lambda v: isinstance(v, (tuple, list)) and all(isinstance(e, Tensor) for e in v))
INT = Kind("int", _is_int)
NUMBER = Kind("Number", _is_number)
BOOL = Kind("bool", lambda v: isinstance(v, (bool, np.bool_, numbers.Integral)))
FLAG = Kind("bool", lambda v: isinstance(v, (bool, np.bool_)))   # PyTorch's strict bool (an int is refused)
DIM = Kind("int", _is_int, dim=True)
DIMS = Kind("tuple of ints", lambda v: _is_int(v) or _is_ints(v), dim=True)
SHAPE = Kind("tuple of ints", lambda v: _is_int(v) or _is_ints(v))
DTYPE = Kind("torch.dtype", _is_dtype)
STR = Kind("str", lambda v: isinstance(v, str))
OUTPUT_SIZE = Kind("tuple of ints", lambda v: v is not None)   # torch's own checks give ValueError for the rest

KINDS = {
    "x": TENSOR, "input": TENSOR, "a": TENSOR, "weight": TENSOR, "target": TENSOR, "index": TENSOR,
    "mask": TENSOR, "condition": TENSOR, "mat1": TENSOR, "mat2": TENSOR, "batch1": TENSOR, "batch2": TENSOR,
    "tensor1": TENSOR, "tensor2": TENSOR, "vec": TENSOR, "vec2": TENSOR, "tensor": TENSOR, "source": TENSOR,
    "src": TENSOR, "bias": TENSOR, "pos_weight": TENSOR,
    "b": OPERAND, "other": OPERAND, "end": OPERAND, "p": OPERAND, "min": OPERAND, "max": OPERAND,
    "tensors": TENSORS, "operands": TENSOR, "output_size": OUTPUT_SIZE,
    "num_groups": Kind("int", lambda v: _is_int(v) or isinstance(v, Tensor)),
    "dim": DIMS, "dims": DIMS, "dim0": DIM, "dim1": DIM, "dim2": DIM, "axis0": DIM, "axis1": DIM,
    "start_dim": DIM, "end_dim": DIM,
    "keepdim": BOOL, "descending": BOOL, "stable": BOOL, "largest": BOOL, "sorted": BOOL, "replacement": BOOL,
    "training": BOOL, "unbiased": BOOL, "align_corners": BOOL, "antialias": BOOL,
    "k": INT, "n": INT, "chunks": INT, "num_samples": INT, "num_classes": INT, "diagonal": INT, "offset": INT,
    "start": INT, "length": INT, "decimals": INT, "groups": INT, "ignore_index": INT,
    "alpha": NUMBER, "beta": NUMBER, "fill_value": NUMBER, "value": OPERAND, "eps": NUMBER,
    "negative_slope": NUMBER, "nan": NUMBER, "posinf": NUMBER, "neginf": NUMBER, "min_val": NUMBER,
    "max_val": NUMBER, "delta": NUMBER,
    "threshold": NUMBER, "label_smoothing": NUMBER, "correction": NUMBER,
    "size": SHAPE, "shape": SHAPE, "sizes": SHAPE, "normalized_shape": SHAPE, "shifts": SHAPE, "pad": SHAPE,
    "kernel_size": SHAPE, "stride": SHAPE, "padding": SHAPE, "dilation": SHAPE, "output_padding": SHAPE,
    "repeats": OPERAND, "split_size_or_sections": SHAPE,
    "dtype": DTYPE, "window_length": INT, "periodic": BOOL, "row": INT, "col": INT,
    "reduction": STR, "mode": STR, "approximate": STR, "equation": STR, "rounding_mode": STR,
}
NUMBER_OR_STR = Kind("Number or str", lambda v: isinstance(v, str) or _is_number(v))
INT_OR_TENSOR = Kind("int or Tensor", lambda v: isinstance(v, Tensor) or _is_int(v), dim=True)   # max(x, other)
SHAPE_OR_DTYPE = Kind("tuple of ints or dtype", lambda v: _is_int(v) or _is_ints(v) or _is_dtype(v))   # view
OP_KINDS = {}   # (op name, parameter) -> Kind, or None where unchecked: declared beside each op (`kinds`)


def kinds(name=None, /, **by_parameter):
    """Decorator: the parameters of an op (named `name`, else the function's own name; the kinds hold for
    every function ggrad exposes under that name) that take another kind than their names say in KINDS;
    None leaves a parameter unchecked."""
    def declare(fn):
        for parameter, kind in by_parameter.items():
            OP_KINDS[(name or fn.__name__, parameter)] = kind
        return fn
    return declare


# The parameter names PyTorch's messages use where ggrad's differ.
TORCH_NAMES = {"x": "input", "a": "input", "b": "other"}

_signatures = {}


def _signature(fn):
    if fn not in _signatures:
        try:
            _signatures[fn] = inspect.signature(fn)
        except (TypeError, ValueError):
            _signatures[fn] = None
    return _signatures[fn]


def kind_of(op, param):
    """The Kind of parameter `param` of op `op`, or None where it is not checked."""
    key = (op, param.name)
    return OP_KINDS[key] if key in OP_KINDS else KINDS.get(param.name)


def _values(param, value):
    """(value, ...) to check for one bound parameter: a *args parameter gives its elements, or those of the
    single sequence it was given (`reshape(x, (2, 3))`, `einsum(eq, [a, b])`)."""
    if param.kind is not param.VAR_POSITIONAL:
        return (value,)
    if len(value) == 1 and isinstance(value[0], (tuple, list)):
        return tuple(value[0])
    return value


def _dim_error(op, value, ndim):
    """IndexError for a dim (or dims) out of range of a tensor with `ndim` dims, as PyTorch words it."""
    span = max(ndim, 1)
    for d in (value,) if not isinstance(value, (tuple, list)) else value:
        if isinstance(d, Tensor):
            continue
        if not -span <= int(d) < span:
            return IndexError(f"{op}(): Dimension out of range (expected to be in range of [{-span}, {span - 1}], "
                              f"but got {int(d)})")
    return None


def explain(fn, op, args, kwargs, method=False):
    """PyTorch's exception for a failed call `fn(*args, **kwargs)` of the public op `op` whose arguments
    are not of their kinds, or None when every checked argument fits (the op's own error stands). A
    `method`'s first argument is self, which PyTorch does not count in positions."""
    sig = _signature(fn)
    if sig is None:
        return None
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return None
    first = next((v for v in bound.arguments.values() if isinstance(v, Tensor)), None)
    position = -1 if method else 0
    for name, param in sig.parameters.items():
        kind = kind_of(op, param)
        if name not in bound.arguments:
            if param.kind is param.VAR_POSITIONAL and kind in (SHAPE, DIMS):
                return ArgumentTypeError(f"{op}() missing 1 required positional argument: '{name}'")
            continue
        for v in _values(param, bound.arguments[name]):
            position += 1
            if kind is None or (v is None and param.default is None) or (v is param.default):
                continue
            if kind is DTYPE and v is None:
                continue
            if not kind.fits(v):
                shown = TORCH_NAMES.get(name, name)
                error = NotATensorError if kind is TENSOR else ArgumentTypeError
                return error(f"{op}(): argument '{shown}' (position {position}) must be {kind.label}, "
                             f"not {type(v).__name__}")
            if kind.dim and first is not None and not isinstance(v, Tensor):
                error = _dim_error(op, v, first.ndim)
                if error is not None:
                    return error
    return None
