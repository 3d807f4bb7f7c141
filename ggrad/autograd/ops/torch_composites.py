"""PyTorch's small convenience ops that are compositions of ggrad's primitives (no gradient code of their own).

mm/bmm/mv/dot/outer check the ranks PyTorch requires and then reuse matmul; the `*_as` family, swapaxes and
movedim forward to reshape/expand/permute; lerp, addcmul, addcdiv, rsub, logaddexp are elementwise formulas.
"""

import numpy as np

from ...ggml.errors import ArgumentError, DTypeError, ShapeError
from ..dtype_rules import as_float32, promote, require_float
from ..factory import zeros_like
from ..function import Function
from . import arith, binary, indexing, joins, logical, products, reduce, scan, shape_ops, unary, views
from .math import isnan, log1p
from .selection import where
from ..tensor import Tensor, _axis
from ..declaration import declare
from ..arguments import DIMS, OPERAND, SHAPE, TENSOR, kinds

_ALL = object()  # prod's "no dim given" (PyTorch refuses dim=None there)


def _require_rank(op, **tensors):
    """PyTorch's rank checks: mm wants 2-D operands, bmm 3-D, mv (2-D, 1-D), dot/outer 1-D."""
    for name, (t, rank) in tensors.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
        if t.ndim != rank:
            raise ShapeError(f"{op}: {name} must be {rank}-D, got shape {t.shape}")


@declare(method=True)
def mm(input, mat2):  # noqa: A002 (PyTorch's names)
    _require_rank("mm", input=(input, 2), mat2=(mat2, 2))
    return products.matmul(input, mat2)


@declare(method=True)
def bmm(input, mat2):  # noqa: A002
    _require_rank("bmm", input=(input, 3), mat2=(mat2, 3))
    if input.shape[0] != mat2.shape[0]:
        raise ShapeError(f"bmm: batch sizes differ: {input.shape} and {mat2.shape}")
    return products.matmul(input, mat2)


@declare(method=True)
def mv(input, vec):  # noqa: A002
    _require_rank("mv", input=(input, 2), vec=(vec, 1))
    return products.matmul(input, vec)


@declare(method=True)
def dot(input, tensor):  # noqa: A002
    _require_rank("dot", input=(input, 1), tensor=(tensor, 1))
    if input.shape != tensor.shape:
        raise ShapeError(f"dot: both vectors need the same length, got {input.shape} and {tensor.shape}")
    return reduce.sum(binary.mul(input, tensor))


@declare(method=True, aliases=("ger",))
def outer(input, vec2):  # noqa: A002
    _require_rank("outer", input=(input, 1), vec2=(vec2, 1))
    return binary.mul(views.unsqueeze(input, 1), views.unsqueeze(vec2, 0))




def _scaled_sum(input, product, beta, alpha):
    """beta * input + alpha * product; with beta == 0 `input` is ignored (its nan and inf too), as PyTorch."""
    scaled = binary.mul(product, alpha)
    return scaled if beta == 0 else binary.add(binary.mul(input, beta), scaled)


@declare(method=True)
def addmm(input, mat1, mat2, *, beta=1, alpha=1):  # noqa: A002
    """beta * input + alpha * (mat1 @ mat2)."""
    return _scaled_sum(input, mm(mat1, mat2), beta, alpha)


@declare(method=True)
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """beta * input + alpha * (batch1 @ batch2), batch by batch."""
    return _scaled_sum(input, bmm(batch1, batch2), beta, alpha)


@declare(method=True, aliases=("swapdims",))
def swapaxes(input, axis0, axis1):  # noqa: A002
    return views.transpose(input, axis0, axis1)




@kinds(source=DIMS, destination=DIMS)
@declare(method=True, aliases=("moveaxis",))
def movedim(input, source, destination):  # noqa: A002
    """Move dims `source` to positions `destination` (ints or equal-length sequences), the rest kept in order."""
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ValueError(f"movedim: source {source} and destination {destination} differ in length")
    n = input.ndim
    src, dst = [_axis(s, n) for s in src], [_axis(d, n) for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"movedim: repeated dimension in source {source} or destination {destination}")
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(n) if i not in src)
    return views.permute(input, [o if o is not None else next(rest) for o in order])


@declare(method=True)
def view_as(input, other):  # noqa: A002
    return views.reshape(input, other.shape)


@declare(method=True)
def reshape_as(input, other):  # noqa: A002
    return views.reshape(input, other.shape)


@declare(method=True)
def expand_as(input, other):  # noqa: A002
    return views.expand(input, other.shape)


@declare(method=True)
def broadcast_to(input, size):  # noqa: A002
    return views.expand(input, (size,) if isinstance(size, int) else tuple(size))


@declare(method=True)
def type_as(input, other):  # noqa: A002
    return input.to(other.dtype)


@declare(method=True)
def clamp_min(input, min):  # noqa: A002
    return arith.clamp(input, min=min)


@declare(method=True)
def clamp_max(input, max):  # noqa: A002
    return arith.clamp(input, max=max)


@declare(method=True)
def negative(input):  # noqa: A002
    return unary.neg(input)


@declare(method=True)
def true_divide(input, other):  # noqa: A002
    return binary.div(input, other)


@declare()
def rsub(input, other, *, alpha=1):  # noqa: A002
    """other - alpha * input."""
    return binary.sub(other, binary.mul(input, alpha))


@kinds(weight=OPERAND, end=TENSOR)
@declare(method=True)
def lerp(input, end, weight):  # noqa: A002
    """input + weight * (end - input)."""
    return binary.add(input, binary.mul(weight, binary.sub(end, input)))


@declare(method=True)
def addcmul(input, tensor1, tensor2, *, value=1):  # noqa: A002
    return binary.add(input, binary.mul(binary.mul(tensor1, tensor2), value))


@declare(method=True)
def addcdiv(input, tensor1, tensor2, *, value=1):  # noqa: A002
    return binary.add(input, binary.mul(binary.div(tensor1, tensor2), value))


class _LogAddExp(Function):
    """log(exp(a) + exp(b)) without overflow: max + log1p(exp(-|a - b|)), with the max picked exactly and
    equal operands (both -inf or +inf too) giving max + log 2, as PyTorch. Gradients PyTorch's:
    g exp(a - y) and g exp(b - y) (halves for equal operands, nan where both are -inf or +inf)."""

    @staticmethod
    def forward(ctx, a, b):
        top = where(logical.ge(a, b), a, b)
        gap = where(logical.eq(a, b), zeros_like(a), unary.neg(unary.abs(binary.sub(a, b))))
        y = binary.add(top, log1p(unary.exp(gap)))
        ctx.save_for_backward(a, b, y)
        return y

    @staticmethod
    def backward(ctx, g):
        a, b, y = ctx.saved_tensors
        return g * unary.exp(a - y), g * unary.exp(b - y)


@declare(method=True)
def logaddexp(input, other):  # noqa: A002
    """log(exp(input) + exp(other)), elementwise, without overflow (see _LogAddExp)."""
    a, b = promote(input, other, "logaddexp")
    require_float(a, "logaddexp")   # PyTorch has no integer kernel
    shape = binary.broadcast_shapes(a.shape, b.shape, "logaddexp")
    return _LogAddExp.apply(a.expand(shape), b.expand(shape))


@declare(method=True)
def logcumsumexp(x, dim):
    """log(cumsum(exp(x))) along dim: a scan of logaddexp, so every prefix keeps its own range (a row-wide
    shift would underflow the prefixes far below the row's maximum)."""
    src = as_float32(x, "logcumsumexp") * 1.0
    if not x.ndim:
        return src
    return scan.doubling_scan(src, _axis(dim, x.ndim), logaddexp, -np.inf)


@declare(method=True)
def prod(input, dim=_ALL, keepdim=False, *, dtype=None):  # noqa: A002
    """Product over `dim` (all elements when not given): the last entry of cumprod, whose gradient handles zeros."""
    reduce.check_flag(keepdim, "keepdim", "prod")
    if dim is not _ALL:
        dim = _axis(dim, input.ndim)
    reduced = input.numel() if dim is _ALL else input.shape[dim] if input.ndim else 1
    if reduced == 0:  # the empty product is 1
        return binary.add(binary.mul(reduce.sum(input, None if dim is _ALL else dim, keepdim, dtype=dtype), 0), 1)
    if dim is _ALL:
        out = views.narrow(scan.cumprod(views.reshape(input, (-1,)), 0, dtype=dtype), 0, reduced - 1, 1)
        return views.reshape(out, (1,) * input.ndim if keepdim else ())
    if not input.ndim:
        return scan.cumprod(input, 0, dtype=dtype)
    out = views.narrow(scan.cumprod(input, dim, dtype=dtype), dim, reduced - 1, 1)
    return out if keepdim else views.squeeze(out, dim)


@kinds(sizes=None)
@declare(method=True)
def unflatten(input, dim, sizes):  # noqa: A002
    """Split dimension `dim` into `sizes` (one entry may be -1)."""
    d = _axis(dim, input.ndim)
    return views.reshape(input, tuple(input.shape[:d]) + tuple(sizes) + tuple(input.shape[d + 1:]))


@kinds(dims=SHAPE)
@declare(method=True)
def tile(input, dims):  # noqa: A002
    """repeat, with `dims` padded by leading 1s when it is shorter than input's rank (PyTorch's rule)."""
    if isinstance(dims, Tensor):
        raise TypeError("tile(): argument 'dims' (position 2) must be tuple of ints, not Tensor")
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return shape_ops.repeat(input, (1,) * (input.ndim - len(dims)) + dims)


@declare(method=True)
def diff(input, n=1, dim=-1):  # noqa: A002
    """The n-th forward difference along `dim`: out[i] = x[i + 1] - x[i], applied n times."""
    d = _axis(dim, input.ndim)
    if n < 0:
        raise RuntimeError(f"diff: order must be non-negative but got {n}")
    for _ in range(n):
        length = input.shape[d]
        if length == 0:
            break
        input = binary.sub(views.narrow(input, d, 1, length - 1), views.narrow(input, d, 0, length - 1))
    return input


@declare()
def hstack(tensors):
    """cat along dimension 1, or 0 for 1-D tensors."""
    tensors = joins.sequence(tensors, "hstack")
    return joins.cat(tensors, 0 if tensors and tensors[0].ndim == 1 else 1)


@declare()
def vstack(tensors):
    """cat along dimension 0 after making 1-D tensors rows."""
    return joins.cat([views.unsqueeze(t, 0) if t.ndim == 1 else t for t in joins.sequence(tensors, "vstack")], 0)


# ---- aliases and one-liners PyTorch code calls by these names ------------------------------------------
@declare(method=True)
def multiply(input, other):  # noqa: A002
    return binary.mul(input, other)


@declare(method=True)
def subtract(input, other, *, alpha=1):  # noqa: A002
    return binary.sub(input, other, alpha)




@declare(method=True)
def ravel(input):  # noqa: A002
    """input flattened to 1-D (a view when it can be, else a copy)."""
    return views.reshape(input, input.numel())


@declare(method=True)
def positive(input):  # noqa: A002
    """input itself (PyTorch's unary plus); a bool tensor is refused, as PyTorch."""
    if input.dtype.name == "bool":
        raise TypeError("The `+` operator, on a bool tensor is not supported.")
    return input


@declare(method=True)
def take_along_dim(input, indices, dim=None):  # noqa: A002
    """input's entries at `indices` along `dim` (both broadcast except along dim); dim=None reads the
    flattened input."""
    if dim is None:
        return indexing.gather(views.reshape(input, input.numel()), 0, views.reshape(indices, indices.numel()))
    d = _axis(dim, input.ndim)
    if indices.ndim != input.ndim:
        raise ShapeError(f"take_along_dim: input {input.shape} and indices {indices.shape} must have the same "
                         "number of dimensions")
    outer = list(binary.broadcast_shapes(tuple(1 if i == d else n for i, n in enumerate(input.shape)),
                                         tuple(1 if i == d else n for i, n in enumerate(indices.shape)),
                                         "take_along_dim"))
    src = views.expand(input, tuple(input.shape[d] if i == d else n for i, n in enumerate(outer)))
    index = views.expand(indices, tuple(indices.shape[d] if i == d else n for i, n in enumerate(outer)))
    return indexing.gather(src, d, index)


@declare(method=True)
def nansum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """The sum with nan entries counted as zero (their gradient is 0)."""
    if not input.dtype.is_float:
        return reduce.sum(input, dim, keepdim, dtype)
    return reduce.sum(where(isnan(input), 0.0, input), dim, keepdim, dtype)


@declare(method=True)
def nanmean(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """The mean of the entries that are not nan (nan where all are); nan entries get gradient 0."""
    if not input.dtype.is_float:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype but got "
                           f"{input.dtype.torch_name}")
    numbers = 1.0 - isnan(input).float()
    return nansum(input, dim, keepdim, dtype=dtype) / reduce.sum(numbers, dim, keepdim)


@declare(method=True)
def tensor_split(input, indices_or_sections, dim=0):  # noqa: A002
    """Views of `input` along `dim`: `sections` (an int) pieces as equal as they come (the first ones one
    longer), or the pieces between the given `indices` (a list or tuple; out of range ones clip)."""
    d = _axis(dim, input.ndim)
    n = input.shape[d]
    if isinstance(indices_or_sections, Tensor):
        given = indices_or_sections
        if given.dtype.is_float or given.dtype.name == "bool":
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have integer dtype, but got "
                               f"{given.dtype.torch_name}")
        if given.ndim > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               f"one-dimensional tensor, but got a tensor with {given.ndim} dims")
        indices_or_sections = given.tolist()
    if isinstance(indices_or_sections, (list, tuple)):
        bad = [i for i in indices_or_sections if not isinstance(i, int) or isinstance(i, bool)]
        if bad:
            raise TypeError("tensor_split(): argument 'indices' must be tuple of ints, but found element of type "
                            f"{type(bad[0]).__name__}")
    if isinstance(indices_or_sections, int) and not isinstance(indices_or_sections, bool):
        sections = indices_or_sections
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        sizes = [n // sections + (1 if i < n % sections else 0) for i in range(sections)]
        bounds = [sum(sizes[:i]) for i in range(sections + 1)]
    elif isinstance(indices_or_sections, (list, tuple)):
        bounds = [0] + [min(max(int(i) + (n if int(i) < 0 else 0), 0), n) for i in indices_or_sections] + [n]
    else:
        raise TypeError(f"tensor_split(): argument 'indices_or_sections' must be int, list or tuple of ints, or a "
                        f"Tensor, not {type(indices_or_sections).__name__}")
    return tuple(views.narrow(input, d, start, max(stop - start, 0)) for start, stop in zip(bounds, bounds[1:]))


def _index_key(x, dim, index, op):
    if not isinstance(index, Tensor) or index.dtype.is_float or index.ndim > 1:
        raise IndexError(f"{op}(): index must be a 1-D integer tensor (long or int)")
    return (slice(None),) * _axis(dim, x.ndim) + (index,)


@declare(method=True)
def index_fill(input, dim, index, value):  # noqa: A002
    """input with the slices at `index` along `dim` set to `value` (a number or 0-d tensor)."""
    out = input.clone()   # a new tensor (gradients pass): the write must not reach the caller's input
    out[_index_key(input, dim, index, "index_fill")] = value
    return out


@declare(method=True)
def index_copy(input, dim, index, source):  # noqa: A002
    """input with its slices at `index` along `dim` replaced by source's (in order)."""
    out = input.clone()
    out[_index_key(input, dim, index, "index_copy")] = source   # one advanced index keeps its place
    return out


@declare(method=True)
def diag(input, diagonal=0):  # noqa: A002
    """A 1-D input as the diagonal `diagonal` of a square matrix; a 2-D input's diagonal as 1-D."""
    if input.ndim == 2:
        return indexing.diagonal(input, diagonal) * 1
    if input.ndim != 1:
        raise ShapeError(f"diag(): expected a 1-D or 2-D input, got shape {input.shape}")
    n = input.shape[0] + abs(diagonal)
    rows = np.arange(input.shape[0]) + max(-diagonal, 0)
    cols = np.arange(input.shape[0]) + max(diagonal, 0)
    out = input.new_zeros(n, n)
    out[rows, cols] = input
    return out


@kinds(tensors=TENSOR)
@declare()
def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids of the 1-D inputs: 'ij' (matrix) or 'xy' (Cartesian, the first two swapped)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ArgumentError(f"meshgrid: indexing must be one of 'xy' or 'ij', got {indexing!r}")   # PyTorch's type
    if any(t.ndim > 1 for t in tensors):
        raise ShapeError("meshgrid: expects 0-D or 1-D tensors")
    if len({t.dtype for t in tensors}) > 1:
        raise DTypeError("meshgrid expects all tensors to have the same dtype")
    flat = [views.reshape(t, t.numel()) for t in tensors]
    swap = indexing == "xy" and len(flat) >= 2
    if swap:
        flat[0], flat[1] = flat[1], flat[0]
    shape = tuple(t.shape[0] for t in flat)
    grids = [views.expand(views.reshape(t, tuple(n if i == k else 1 for i, n in enumerate(shape))), shape)
             for k, t in enumerate(flat)]
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)
