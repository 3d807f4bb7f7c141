"""Reductions: sum, mean, var, std, amax/amin, max/min with indices, argmax, logsumexp.

Sums over any set of dimensions are GGML's `repeat_back` (a sum into a broadcastable shape), or
`sum_rows` for the innermost one; a row's maximum is its element at its argmax.
"""

import builtins
import numbers
import warnings
from collections import namedtuple

import numpy as np

from ...ggml import f32, kernels, ops
from ..autocast_hook import FLOAT32, autocast_op
from ..torch_dtypes import INT64, resolve
from ..dtype_rules import as_float32, require_float
from ..factory import tensor
from ..grad_mode import no_grad
from ..lowering import choice
from ..memory import pending_graph
from ..pending import ne_of
from ..primitive import Primitive
from ..tensor import _axis
from . import unary as un
from .broadcast import Expand, SumTo, row_sums_node
from .folding import sum_to
from ..declaration import declare

values_indices = namedtuple("values_indices", ["values", "indices"])


def normalize_dims(dim, ndim):
    """A sorted tuple of non-negative dimensions from an int, a tuple or None (all)."""
    if dim is None:
        return tuple(range(ndim))
    if not isinstance(dim, (int, np.integer, tuple, list)):
        raise TypeError(f"dim must be an int or a tuple of ints, got {type(dim).__name__}")
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    out = sorted({_axis(d, ndim) for d in dims})
    return tuple(out)


def check_flag(value, name, op):
    """TypeError unless `value` is a bool (or an int), as PyTorch's parser: `keepdim="yes"` is no flag."""
    if value is not False and value is not True and not isinstance(value, (numbers.Integral, np.bool_)):
        raise TypeError(f"{op}(): argument '{name}' must be bool, not {type(value).__name__}")


def _kept_shape(shape, dims):
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


def _dropped_shape(shape, dims):
    return tuple(s for i, s in enumerate(shape) if i not in dims)


class SumAll(Primitive):
    """The sum of every element, as a 0-d tensor."""

    @staticmethod
    def build(ctx, graph, x):
        return ops.sum(graph.ctx, x)

    @staticmethod
    def shape(x):
        return ()

    @staticmethod
    def backward(ctx, g):
        return Expand.apply(g, ctx.shapes[0])


class SumRows(Primitive):
    """Sum over the last dimension, keeping it (size 1)."""

    @staticmethod
    def build(ctx, graph, x):
        return row_sums_node(graph, x)

    @staticmethod
    def shape(x):
        return x.shape[:-1] + (1,)

    @staticmethod
    def backward(ctx, g):
        return Expand.apply(g, ctx.shapes[0])


@declare(method=True)
def sum(x, dim=None, keepdim=False, dtype=None):  # noqa: A001 (PyTorch's name)
    """Sum over `dim` (int, tuple, or None for all)."""
    check_flag(keepdim, "keepdim", "sum")
    src = as_float32(x, "sum", allow_int=True)
    dims = normalize_dims(dim, x.ndim)
    if not x.ndim:
        out = src * 1.0
    elif len(dims) == x.ndim and not keepdim:
        out = SumAll.apply(src)
    else:
        kept = _kept_shape(x.shape, dims)
        if dims == (x.ndim - 1,):
            out = SumRows.apply(src)
        elif x.ndim > 4:
            out = sum_to(src, kept)
        else:
            out = SumTo.apply(src, kept)
        if not keepdim:
            out = out.reshape(_dropped_shape(x.shape, dims))
    if dtype is not None:
        return out.to(resolve(dtype))
    if not x.dtype.is_float:
        return out.to(INT64)   # PyTorch sums integers and bools in int64
    return out.to(x.dtype) if x.dtype is not f32 else out


@declare(method=True)
def mean(x, dim=None, keepdim=False, dtype=None):
    """The mean over `dim`; `dtype` converts x first (PyTorch's way to average integers)."""
    if dtype is not None:
        x = x.to(resolve(dtype))
    require_float(x, "mean")
    dims = normalize_dims(dim, x.ndim)
    count = 1
    for d in dims:
        count *= x.shape[d]
    return sum(x, dim, keepdim) * (1.0 / count if count else float("nan"))   # the mean of nothing is nan


@declare(method=True)
def var(x, dim=None, unbiased=None, keepdim=False, correction=None):
    """Variance with Bessel's correction by default (`correction=1`), as in PyTorch."""
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    dims = normalize_dims(dim, x.ndim)
    count = 1
    for d in dims:
        count *= x.shape[d]
    centered = x - mean(x, dims, keepdim=True)
    squares = sum(centered * centered, dims, keepdim)
    if count - correction <= 0:   # PyTorch divides by max(0, N - correction): nan for 0 / 0, else inf
        warnings.warn("var(): degrees of freedom is <= 0. Correction should be strictly less than the reduction "
                      "factor (input numel divided by output numel).", UserWarning, stacklevel=3)
        return squares * float("inf")
    return squares * (1.0 / (count - correction))


@declare(method=True)
def std(x, dim=None, unbiased=None, keepdim=False, correction=None):
    return un.sqrt(var(x, dim, unbiased, keepdim, correction))


class RowMax(Primitive):
    """Maximum over the last dimension (kept, size 1); the gradient goes to every maximal entry."""
    saves = "input+output"

    @staticmethod
    def build(ctx, graph, x):
        # each row's element at its argmax: rows as batches of n one-element rows, one index per batch. Not
        # pool_1d's max: it starts from -FLT_MAX (a row of -inf gave -3.4e38), CUDA has no kernel for it (the
        # step would split around it), and on the CPU it was no faster ([8192, 512]: 4.4 vs 3.2 ms)
        n = ctx.shapes[0][-1]
        rows = x.nelements // n
        first = ops.argmax(graph.ctx, ops.reshape_2d(graph.ctx, x, n, rows))                  # i32 [rows]
        picked = ops.get_rows(graph.ctx, ops.reshape_3d(graph.ctx, x, 1, n, rows),
                              ops.reshape_2d(graph.ctx, first, 1, rows))                       # [1, 1, rows]
        return ops.reshape_4d(graph.ctx, picked, *ne_of(ctx.shapes[0][:-1] + (1,)))

    @staticmethod
    def shape(x):
        return x.shape[:-1] + (1,)

    @staticmethod
    def backward(ctx, g):
        x, m = ctx.saved_tensors
        hit = 1.0 - un.Step.apply(m - x)
        return g * hit / SumRows.apply(hit)


class ArgmaxRows(Primitive):
    """Index of the first maximum of each row of a 2-D x, as int32 (not differentiable)."""

    @staticmethod
    def build(ctx, graph, x):
        return ops.argmax(graph.ctx, x)

    @staticmethod
    def shape(x):
        return (x.shape[0],)

    @staticmethod
    def result_dtype(x):
        return INT64   # held as GGML's int32


class FirstArgmaxRows(ArgmaxRows):
    """Index of the first maximum (or the first nan) of each row of a 2-D f32 x, as int32, by ggrad's CPU
    kernel in one node (lowering.argmax); not differentiable."""

    @staticmethod
    def build(ctx, graph, x):
        return kernels.argmax_f32(graph.ctx, x if x.is_contiguous else ops.cont(graph.ctx, x))


def _move_last(x, d):
    """x with dimension d moved to the end (and the permutation to undo it)."""
    if d == x.ndim - 1:
        return x, None
    perm = [i for i in range(x.ndim) if i != d] + [d]
    inverse = [perm.index(i) for i in range(x.ndim)]
    return x.permute(*perm), inverse


def _nonempty_reduction(x, dim, op):
    """PyTorch's errors for a maximum over nothing: RuntimeError without a dim (IndexError for argmax, as
    PyTorch), IndexError along an empty one."""
    if dim is None and x.numel() == 0:
        raise (IndexError if op.startswith("arg") else RuntimeError)(f"{op}(): Expected reduction dim to be specified for input.numel() == 0.")
    for d in normalize_dims(dim, x.ndim) if x.ndim else ():
        if x.shape[d] == 0:
            raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")


@declare(method=True)
def amax(x, dim=None, keepdim=False):
    out, src = _amax(x, dim, keepdim)
    if x.dtype.is_float:
        out = out + _nan_if_any(src, dim, keepdim)
    return out.to(x.dtype) if out.dtype is not x.dtype else out


def _amax(x, dim, keepdim):
    """(the maximum over dim as float32, where a nan may be skipped; x as float32): amax without its nan
    pass, for callers whose values hold no nan or carry it on by themselves (logsumexp, any/all)."""
    check_flag(keepdim, "keepdim", "amax")
    _nonempty_reduction(x, dim, "amax")
    src = as_float32(x, "amax", allow_int=True)
    if dim is None or x.ndim == 0:
        flat = src.reshape(1, x.numel())
        out = RowMax.apply(flat).reshape(())
        if keepdim:
            out = out.reshape((1,) * x.ndim)
    else:
        dims = normalize_dims(dim, x.ndim)
        if len(dims) == 1:
            moved, inverse = _move_last(src, dims[0])
            reduced = RowMax.apply(moved)
            out = reduced if inverse is None else reduced.permute(*inverse)
        else:   # the reduced dims as one last dim: ties share the gradient evenly, as PyTorch's
            rest = [d for d in range(x.ndim) if d not in dims]
            moved = src.permute(*rest, *dims).reshape(tuple(x.shape[d] for d in rest) + (-1,))
            out = RowMax.apply(moved).reshape(_kept_shape(x.shape, dims))
        if not keepdim:
            out = out.reshape(_dropped_shape(x.shape, dims))
    return out, src


def _nan_if_any(src, dim, keepdim):
    """0 where the reduction of src over dim holds no nan, nan where it does (PyTorch's max and min
    propagate nan; GGML's row maximum may skip it): sqrt(-1) is nan. Recorded without gradient."""
    with no_grad():
        return un.Sqrt.apply(-un.Step.apply(sum(un.IsNan.apply(src), dim, keepdim)))


@declare(method=True)
def amin(x, dim=None, keepdim=False):
    return -amax(-x, dim, keepdim)


@declare(method=True)
def argmax(x, dim=None, keepdim=False):
    """Index of the (first) maximum along `dim` (flattened when None), as int32."""
    check_flag(keepdim, "keepdim", "argmax")
    _nonempty_reduction(x, dim, "argmax")
    src = as_float32(x, "argmax", allow_int=True)
    if dim is None:
        flat = src.reshape(1, x.numel())
        out = _first_argmax(flat).reshape(())
        return out.reshape((1,) * x.ndim) if keepdim else out
    d = normalize_dims(dim, x.ndim)[0]
    moved, _ = _move_last(src, d)
    rows = moved.reshape(-1, x.shape[d])
    out = _first_argmax(rows).reshape(moved.shape[:-1])
    if keepdim:
        out = out.unsqueeze(d)
    return out


def _first_argmax(rows):
    """The index of the first maximum (or nan) of each row of f32 `rows` (2-D)."""
    return _first_argmax_rows(pending_graph(rows.device), rows)


@choice("argmax")
def _first_argmax_rows(graph, rows):
    """GGML's argmax of `_first_max_key`, or one kernel node where the lowering has it."""
    return ArgmaxRows.apply(_first_max_key(rows))


@_first_argmax_rows.alternative("kernel")
def _first_argmax_by_kernel(graph, rows):
    return FirstArgmaxRows.apply(rows)


def _first_max_key(rows):
    """Rows whose one maximum sits at the first maximum of `rows`: GGML's argmax takes the last of ties,
    PyTorch the first. 1 marks the maxima, weighted n, n-1, ..., 1 from the left; a nan outranks them
    all (PyTorch's argmax finds the first nan)."""
    with no_grad():
        n = rows.shape[-1]
        hit = 1.0 - un.Step.apply(RowMax.apply(rows) - rows)
        return hit * _descending(n, rows.device) + un.IsNan.apply(rows) * float(n + 1)


_DESCENDING = {}   # (n, device name) -> the Tensor n, n-1, ..., 1: uploaded once, not per argmax call


def _descending(n, device):
    key = (n, device.name)
    weights = _DESCENDING.get(key)
    if weights is None:
        if len(_DESCENDING) >= 64:
            _DESCENDING.clear()
        weights = _DESCENDING[key] = tensor(np.arange(n, 0, -1, dtype=np.float32), device=device)
    return weights


@declare(method=True)
def argmin(x, dim=None, keepdim=False):
    return argmax(-x, dim, keepdim)


@declare(method=True)
@autocast_op("logsumexp", FLOAT32)
def logsumexp(x, dim, keepdim=False):
    if x.numel() == 0:   # no maximum to shift by: the log of an empty sum, -inf (as PyTorch)
        return un.log(sum(un.exp(x), dim, keepdim))
    m = _amax(x, dim, True)[0].detach()   # a nan in x carries on through exp(x - m): no nan pass
    m = un.Clamp.apply(m if m.dtype is x.dtype else m.to(x.dtype), -un._F32_MAX, un._F32_MAX)   # -inf rows: -inf
    out = un.log(sum(un.exp(x - m), dim, keepdim=True)) + m
    if not keepdim:
        out = out.reshape(_dropped_shape(x.shape, normalize_dims(dim, x.ndim)))
    return out
