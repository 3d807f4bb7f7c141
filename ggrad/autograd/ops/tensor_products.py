"""PyTorch's tensordot, kron and cdist, composed from permute, reshape, matmul and norms."""

from ...ggml.errors import ShapeError
from ..tensor import Tensor, _axis
from .products import matmul
from .vector_norms import vector_norm
from ..declaration import declare
from ..arguments import TENSOR, kinds


@kinds(b=TENSOR)
@declare()
def tensordot(a, b, dims=2, out=None):
    """Contract the last `dims` dims of a with the first `dims` of b, or the dims listed as
    ([dims of a], [dims of b])."""
    if out is not None:
        raise TypeError("tensordot(): out= is not supported")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > a.ndim or dims > b.ndim:
            raise RuntimeError(f"tensordot: contracting {dims} dims of tensors of {a.ndim} and {b.ndim} dims")
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
    dims_a, dims_b = [_axis(d, a.ndim) for d in dims_a], [_axis(d, b.ndim) for d in dims_b]
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[da]} in dim {da} "
                               f"and second has size {b.shape[db]} in dim {db}")
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    inner = 1
    for d in dims_a:
        inner *= a.shape[d]
    left = a.permute(*free_a, *dims_a).reshape(-1, inner)
    right = b.permute(*dims_b, *free_b).reshape(inner, -1)
    return matmul(left, right).reshape(*[a.shape[d] for d in free_a], *[b.shape[d] for d in free_b])


@declare(method=True)
def kron(input, other):  # noqa: A002 (PyTorch's names)
    """The Kronecker product: every element of input times the whole of other, laid out block by block."""
    n = max(input.ndim, other.ndim)
    a = input.reshape((1,) * (n - input.ndim) + tuple(input.shape))
    b = other.reshape((1,) * (n - other.ndim) + tuple(other.shape))
    spread_a = a.reshape(tuple(s for d in a.shape for s in (d, 1)))
    spread_b = b.reshape(tuple(s for d in b.shape for s in (1, d)))
    return (spread_a * spread_b).reshape(tuple(x * y for x, y in zip(a.shape, b.shape)))


@declare()
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of x1 (..., P, M) and each row of x2 (..., R, M): (..., P, R)."""
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if not x1.dtype.is_float:
        raise ShapeError(f"cdist only supports floating-point dtypes, X1 got: {x1.dtype!r}")
    return vector_norm(x1.unsqueeze(-2) - x2.unsqueeze(-3), p, dim=-1)
