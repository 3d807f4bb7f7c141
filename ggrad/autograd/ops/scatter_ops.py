"""Writing by index: index_add, scatter_add, scatter (src or value).

Every write is a list of flat positions in the destination: index_add adds whole rows (GGML
get_rows_back, which adds the rows of its first operand at the given rows of zeros, duplicates summed);
scatter_add adds single elements the same way; scatter overwrites them (GGML set_rows into a copy).
Gradients: to the destination, the gradient itself (scatter: zero where overwritten); to the source,
the gradient picked at the same positions (get_rows).

Positions are computed in float32 and must stay below 2**24 elements.
"""

import numpy as np

from ...ggml import f32, i32, ops
from ...ggml.errors import DTypeError, ShapeError
from ..factory import full, ones, tensor, zeros
from ..primitive import Primitive
from ..tensor import Tensor, _axis
from .indexing import GetRows, GetRowsBack, checked_index, known_values
from .reduce_into import scatter_reduce
from .views import reshape, transpose
from .view_primitives import Slice, prod
from ..declaration import declare
from ..arguments import NUMBER, kinds

_EXACT = 2 ** 24


class AddRowsAt(GetRowsBack):
    """Zeros of `shape` (rows, cols) with row i of `src` added at row index[i]; backward gathers rows."""
    saves = "index"

    @classmethod
    def saved(cls, ctx, args, out):
        return (args[1],)

    @staticmethod
    def backward(ctx, g):
        index, = ctx.saved_tensors
        return GetRows.apply(g, index), None, None


class SetRowsAt(Primitive):
    """A copy of `x` (rows, cols) with rows index[i] replaced by the rows of `src` (GGML set_rows)."""
    saves = "index"

    @staticmethod
    def build(ctx, graph, x, src, index):
        return ops.set_rows(graph.ctx, ops.dup(graph.ctx, x), src, index)

    @classmethod
    def saved(cls, ctx, args, out):
        return (args[2],)

    @staticmethod
    def backward(ctx, g):
        index, = ctx.saved_tensors
        kept = None
        if ctx.needs_input_grad[0]:
            n = index.shape[0]
            written = SetRowsAt.apply(zeros(ctx.shapes[0], device=g.device), ones((n, 1), device=g.device), index)
            kept = g * (1.0 - written)
        picked = GetRows.apply(g, index) if ctx.needs_input_grad[1] else None
        return kept, picked, None


def _float(x):
    return x if x.dtype is f32 else x.to(f32)


def _back(out, like):
    return out if out.dtype is like.dtype else out.to(like.dtype)


@declare(method=True, inplace=True)
def index_add(x, dim, index, source, alpha=1):
    """x with alpha * source[..., i, ...] added at x[..., index[i], ...] along `dim` (duplicates add up)."""
    d = _axis(dim, x.ndim) if x.ndim else 0
    size = x.shape[d] if x.ndim else 1
    index = checked_index(index, size, x.device, "index_add", d)
    if index.ndim > 1:
        raise ShapeError(f"index_add: index must be 1-D, got shape {index.shape}")
    index = reshape(index, index.numel())
    want = x.shape[:d] + (index.shape[0],) + x.shape[d + 1:] if x.ndim else (index.shape[0],)
    if tuple(source.shape) != want and not (x.ndim == 0 and source.numel() == index.numel()):
        raise ShapeError(f"index_add: source shape {source.shape} must be {want} for input {x.shape}, dim {d} "
                         f"and {index.shape[0]} indices")
    moved = transpose(_float(source), 0, d) if d else _float(source)
    rows = reshape(moved.contiguous(), index.shape[0], -1)
    dest = (size, rows.shape[1])
    added = AddRowsAt.apply(rows, index, dest)
    target = transpose(x, 0, d).shape if d else x.shape
    added = reshape(added, target)
    added = transpose(added, 0, d) if d else added
    if alpha != 1:
        added = added * alpha
    return _back(_float(x) + added, x)


def _positions(x, dim, index, op):
    """Flat positions in x of the entries that `index` (shape <= x's) addresses along `dim`."""
    if index.ndim != x.ndim:
        raise RuntimeError(f"{op}: index {index.shape} and input {x.shape} must have the same number of "
                           f"dimensions")
    for e, (n, m) in enumerate(zip(index.shape, x.shape)):
        if e != dim and n > m:
            raise RuntimeError(f"{op}: size of index {index.shape} exceeds the input {x.shape} in dimension {e}")
    if x.numel() >= _EXACT:
        raise ShapeError(f"{op}: input of {x.numel()} elements is too large (positions are exact below 2**24)")
    index = checked_index(index, x.shape[dim], x.device, op, dim)
    strides = [prod(x.shape[e + 1:]) for e in range(x.ndim)]
    grid = np.indices(index.shape)
    base = sum(grid[e] * strides[e] for e in range(x.ndim) if e != dim)
    values = known_values(index)
    if values is not None:
        flat = base + values.astype(np.int64) * strides[dim]
        return tensor(flat.reshape(-1).astype(np.int32), dtype=i32, device=x.device)
    flat = index.to(f32) * float(strides[dim]) + tensor(base.astype(np.float32), device=x.device)
    return reshape(flat, index.numel()).to(i32)


def _source(src, index, x, op):
    """The part of src that index covers, as a column (n, 1) of float32."""
    if not isinstance(src, Tensor):
        return full((index.numel(), 1), float(src), device=x.device)
    if src.ndim != index.ndim or any(n > m for n, m in zip(index.shape, src.shape)):
        raise RuntimeError(f"{op}: index {index.shape} must not be larger than src {src.shape} in any dimension")
    part = src if src.shape == index.shape else Slice.apply(src, (0,) * src.ndim, index.shape)
    return reshape(_float(part), index.numel(), 1)


@declare(method=True, inplace=True)
def scatter_add(x, dim, index, src):
    """x with src[i, j, ...] added at x[..., index[i, j, ...], ...] along `dim` (duplicates add up)."""
    d = _axis(dim, x.ndim)
    index = index if isinstance(index, Tensor) else tensor(np.asarray(index), dtype=i32, device=x.device)
    positions = _positions(x, d, index, "scatter_add")
    added = AddRowsAt.apply(_source(src, index, x, "scatter_add"), positions, (x.numel(), 1))
    return _back(_float(x) + reshape(added, x.shape), x)


@kinds(value=NUMBER)
@declare(method=True, inplace=True)
def scatter(x, dim, index, src=None, value=None, reduce=None):
    """x with x[..., index[i, j, ...], ...] = src[i, j, ...] along `dim` (or the number `value`).

    reduce="add" is scatter_add, reduce="multiply" multiplies in (scatter_reduce's "prod"); with duplicate
    positions and no reduce the value written is one of them, as PyTorch.
    """
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter: give src (a Tensor) or value (a number)")
    index = index if isinstance(index, Tensor) else tensor(np.asarray(index), dtype=i32, device=x.device)
    if reduce == "add":
        return scatter_add(x, dim, index, src if isinstance(src, Tensor) else
                           full(index.shape, float(src), device=x.device))
    if reduce == "multiply":
        source = src if isinstance(src, Tensor) else full(index.shape, float(src), dtype=x.dtype, device=x.device)
        return scatter_reduce(x, dim, index, source, "prod")
    if reduce is not None:
        raise RuntimeError(f"reduce argument must be either add or multiply. Got {reduce!r}")
    if isinstance(src, Tensor) and src.dtype != x.dtype:
        raise DTypeError(f"scatter(): Expected self.dtype to be equal to src.dtype (got {x.dtype.name} and "
                         f"{src.dtype.name})")
    d = _axis(dim, x.ndim)
    positions = _positions(x, d, index, "scatter")
    column = reshape(_float(x), x.numel(), 1)
    written = SetRowsAt.apply(column, _source(src, index, x, "scatter"), positions)
    return _back(reshape(written, x.shape), x)

