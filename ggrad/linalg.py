"""`ggrad.linalg`: PyTorch's torch.linalg namespace.

Norms and products are GGML's ops; `cholesky` and `solve_triangular` are composed of ggrad ops for small
matrices (ggrad/triangular.py). GGML has no other factorization: inv, det, slogdet, solve, lstsq, pinv, qr,
svd, svdvals, eigh, eigvalsh, matrix_rank and matrix_exp run numpy's LAPACK on the host in float64, and lu /
lu_factor an elimination of ggrad's own there, one synchronisation a call, with PyTorch's gradients in the
graph (ggrad/autograd/ops/linear_solvers.py, decompositions.py, lu.py); the matrix norms 'nuc', 2 and -2 and
`cond` stand on svdvals.
"""

import math

from .autograd import Tensor
from .autograd.autocast_hook import FLOAT32, autocast_op
from .autograd.ops import amax, amin, abs as _abs, cat, matmul, sum as _sum
from .autograd.ops.decompositions import (eigh, eigvalsh, linalg_qr as qr, linalg_svd as svd, matrix_rank,
                                          svdvals)
from .autograd.ops.lu import lu, lu_factor, lu_factor_ex, lu_solve
from .autograd.ops.linear_solvers import (inv, inv_ex, linalg_det as det, lstsq, matrix_exp, matrix_power, pinv,
                                          slogdet, solve, solve_ex)
from .autograd.ops.reduce import normalize_dims
from .autograd.ops.vector_norms import vector_norm
from .triangular import LinAlgError, cholesky, cholesky_ex, solve_triangular

__all__ = ["vector_norm", "matrix_norm", "norm", "matmul", "multi_dot", "vecdot", "cross", "cholesky",
           "solve_triangular", "LinAlgError", "inv", "det", "slogdet", "solve", "lstsq", "pinv", "qr", "svd",
           "svdvals", "eigh", "eigvalsh", "matrix_rank", "matrix_exp", "matrix_power", "cond", "lu", "lu_factor",
           "lu_solve", "tensorinv", "tensorsolve", "diagonal", "inv_ex", "solve_ex", "lu_factor_ex",
           "cholesky_ex"]


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, dtype=None):  # noqa: A002 (PyTorch's names)
    """The matrix norm of A over the two dims `dim`: 'fro' (Frobenius), 'nuc' (the sum of the singular values),
    2 / -2 (the largest / smallest singular value: these three read A to the host, one synchronisation),
    inf / -inf (largest / smallest row sum of |A|), 1 / -1 (largest / smallest column sum of |A|)."""
    _check_tensor(A, "matrix_norm")
    if A.ndim < 2:
        raise RuntimeError(f"linalg.matrix_norm: The input tensor A must have at least 2 dimensions, got shape "
                           f"{tuple(A.shape)}")
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple of ints, got {dim!r}")
    rows, cols = normalize_dims(dim, A.ndim)
    if rows == cols:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different, got {tuple(dim)}")
    if dtype is not None:
        A = A.to(dtype)
    if ord == "fro":
        return vector_norm(A, 2, (rows, cols), keepdim)
    if ord in ("nuc", 2, -2):
        values = svdvals(A.movedim((rows, cols), (-2, -1)))
        out = values.sum(-1) if ord == "nuc" else values.amax(-1) if ord == 2 else values.amin(-1)
        return out.unsqueeze(min(rows, cols)).unsqueeze(max(rows, cols)) if keepdim else out
    if ord not in (1, -1, float("inf"), -float("inf")):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord!r} not supported.")
    summed, over = (cols, rows) if abs(ord) == float("inf") else (rows, cols)   # inf: row sums; 1: column sums
    sums = _sum(_abs(A), summed, keepdim=True)
    pick = amax if ord > 0 else amin
    out = pick(sums, over, keepdim=True)
    return out if keepdim else out.squeeze(max(rows, cols)).squeeze(min(rows, cols))


def norm(A, ord=None, dim=None, keepdim=False, dtype=None):  # noqa: A002
    """torch.linalg.norm: a vector norm over one dim (or of the whole flattened tensor when ord and dim
    are None), a matrix norm over two dims (or of a 2-D A when ord is given and dim is None)."""
    _check_tensor(A, "norm")
    if isinstance(dim, int):
        dim = (dim,)
    if ord is None:
        return vector_norm(A, 2, dim, keepdim, dtype) if dim is None or len(dim) == 1 else \
            matrix_norm(A, "fro", dim, keepdim, dtype)
    if dim is None:
        if A.ndim not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                               f"Got {A.ndim}D.")
        dim = tuple(range(A.ndim))
    if len(dim) == 1:
        return vector_norm(A, ord, dim, keepdim, dtype)
    return matrix_norm(A, ord, dim, keepdim, dtype)


def vecdot(x, y, *, dim=-1):
    """The dot product of x and y along `dim` (broadcasting the others), as torch.linalg.vecdot."""
    _check_tensor(x, "vecdot")
    _check_tensor(y, "vecdot")
    return _sum(x * y, dim)


def cross(input, other, *, dim=-1):  # noqa: A002
    """The cross product of 3-vectors along `dim` (broadcasting the others), as torch.linalg.cross."""
    _check_tensor(input, "cross")
    _check_tensor(other, "cross")
    if input.ndim != other.ndim:
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions, got {input.ndim} "
                           f"and {other.ndim}")
    d = dim % input.ndim if -input.ndim <= dim < input.ndim else None
    if d is None or input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {tuple(input.shape)} "
                           f"and {tuple(other.shape)}")

    def part(t, i):
        return t.narrow(d, i, 1)

    a = [part(input, i) for i in range(3)]
    b = [part(other, i) for i in range(3)]
    return cat([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]], d)


def _check_tensor(x, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"linalg.{op}(): argument 'input' must be Tensor, not {type(x).__name__}")


def multi_dot(tensors, *, out=None):
    """The product of the matrices in order (the first may be a vector, as the last), as linalg.multi_dot."""
    if not isinstance(tensors, (list, tuple)) or len(tensors) < 2:
        raise RuntimeError("multi_dot(): expected at least 2 tensors but got "
                           f"{len(tensors) if isinstance(tensors, (list, tuple)) else type(tensors).__name__}")
    for t in tensors:
        _check_tensor(t, "multi_dot")
    result = tensors[0]
    for t in tensors[1:]:
        result = matmul(result, t)
    return result


@autocast_op("linalg_cond", FLOAT32)
def cond(A, p=None):
    """The condition number of A in the matrix norm `p`, as torch.linalg.cond: None / 2 (the largest over the
    smallest singular value), -2 (its inverse), or 'fro', 'nuc', inf, -inf, 1, -1 (norm(A) norm(A^-1), square
    A). Reads A to the host (one synchronisation, two for the norms of A^-1)."""
    _check_tensor(A, "cond")
    if p in (None, 2, -2):
        values = svdvals(A)
        largest, smallest = values.amax(-1), values.amin(-1)
        return largest / smallest if p != -2 else smallest / largest
    if p not in ("fro", "nuc", 1, -1, float("inf"), -float("inf")):
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


def tensorinv(A, ind=2):
    """The inverse of A read as a matrix of its first `ind` dims by the rest (shape A.shape[ind:] +
    A.shape[:ind]), as torch.linalg.tensorinv: linalg.inv of the reshaped A (one synchronisation)."""
    _check_tensor(A, "tensorinv")
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, columns = math.prod(A.shape[:ind]), math.prod(A.shape[ind:])
    if rows != columns:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {columns} != {rows}")
    return inv(A.reshape(rows, columns)).reshape(tuple(A.shape[ind:]) + tuple(A.shape[:ind]))


def tensorsolve(A, B, dims=None):
    """X with tensordot(A, X, X.ndim) = B (the dims `dims` of A moved to its end first), as
    torch.linalg.tensorsolve: linalg.solve of A reshaped to a square matrix (one synchronisation)."""
    _check_tensor(A, "tensorsolve")
    _check_tensor(B, "tensorsolve")
    if dims is not None:
        dims = normalize_dims(tuple(dims), A.ndim)
        A = A.movedim(dims, tuple(range(A.ndim - len(dims), A.ndim)))
    rows, columns = B.numel(), math.prod(A.shape[B.ndim:])
    if rows != columns or math.prod(A.shape[:B.ndim]) != rows:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {columns} != {rows}")
    return solve(A.reshape(rows, columns), B.reshape(rows)).reshape(tuple(A.shape[B.ndim:]))


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonals of the matrices of A (a view), as torch.linalg.diagonal: Tensor.diagonal with the last
    two dims by default."""
    _check_tensor(A, "diagonal")
    return A.diagonal(offset, dim1, dim2)
