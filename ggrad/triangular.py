"""`linalg.cholesky` and `linalg.solve_triangular` for small matrices, and on them `cholesky_solve` and
`cholesky_inverse` (solving with and inverting a symmetric positive-definite matrix from its factor, as
Gaussian-process code does), composed of ggrad ops (GGML has no factorization or solver), so gradients flow
through them and they stay in the graph.

Both loop over the matrix's n rows or columns in Python, a few ops each (about 6 n nodes): meant for the
small matrices of distributions and statistics (tens of rows), not for large linear algebra. Batches
(..., n, n) are handled by each op at once. cholesky reads whether the factorization failed (one
compute, as PyTorch's synchronous check) and raises LinAlgError, as PyTorch's; cholesky_ex reports it.
"""

from collections import namedtuple

import numpy as np

from .autograd import Tensor
from .autograd.factory import eye, tensor, zeros_like
from .autograd.ops import broadcast_shapes, cat, matmul, stack
from .autograd.ops.host_lapack import LinAlgError, batch_prefix

__all__ = ["LinAlgError", "cholesky", "cholesky_ex", "solve_triangular", "cholesky_solve", "cholesky_inverse"]

_cholesky_ex_result = namedtuple("cholesky_ex", ["L", "info"])


def _square(A, op):
    if not isinstance(A, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(A).__name__}")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        rows, columns = (A.shape[-2] if A.ndim > 1 else 1), (A.shape[-1] if A.ndim else 1)
        raise RuntimeError(f"{op}: A must be batches of square matrices, but they are {rows} by {columns} matrices")
    if not A.dtype.is_float:
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got {A.dtype.name}")


def cholesky(A, *, upper=False):
    """L, lower triangular with a positive diagonal, such that A = L L^T (A symmetric positive-definite,
    only its lower triangle read); upper=True gives L^T. LinAlgError when A is not positive-definite, naming
    the order of the first leading minor that is not (one read of L's diagonal), as PyTorch's."""
    L, info = _factor_checked(A, "linalg.cholesky", True)
    return L.transpose(-2, -1) if upper else L


def cholesky_ex(A, *, upper=False, check_errors=False):
    """(L, info) as torch.linalg.cholesky_ex: info (int32, A's batch shape) is 0, or the order of the first
    leading minor that is not positive-definite (L is then nan from that column on, where LAPACK leaves a
    partial factor); check_errors=True raises as cholesky does."""
    L, info = _factor_checked(A, "linalg.cholesky_ex", check_errors)
    return _cholesky_ex_result(L.transpose(-2, -1) if upper else L, info)


def _factor_checked(A, op, check_errors):
    _square(A, op)
    L = _factor(A)
    diagonal = L.diagonal(0, -2, -1).detach().numpy()
    failed = ~(diagonal > 0)   # a nan (the square root of a negative pivot) or a zero pivot
    info = np.where(failed.any(-1), failed.argmax(-1) + 1, 0).astype(np.int32) if diagonal.shape[-1] else \
        np.zeros(diagonal.shape[:-1], np.int32)
    first = np.flatnonzero(info.reshape(-1))
    if check_errors and first.size:
        raise LinAlgError(f"{op}: {batch_prefix(diagonal[..., None], int(first[0]))}The factorization could not be "
                          "completed because the input is not positive-definite (the leading minor of order "
                          f"{int(info.reshape(-1)[first[0]])} is not positive-definite).")
    return L, tensor(info, device=A.device)


def _factor(A):
    """The Cholesky factor of A, column by column in the graph (nan from the first pivot that is not positive)."""
    n = A.shape[-1]
    # the values of A's lower triangle mirrored, the gradient of (A + A^T) / 2: symmetric, as PyTorch's
    symmetric = (A + A.transpose(-2, -1)) * 0.5
    A = symmetric + (A.tril() + A.tril(-1).transpose(-2, -1) - symmetric).detach()
    columns = []
    for j in range(n):
        below = A[..., j:, j]                                   # (..., n - j)
        if j:
            done = stack(columns, -1)                           # (..., n, j)
            below = below - matmul(done[..., j:, :], done[..., j, :].unsqueeze(-1)).squeeze(-1)
        pivot = below[..., :1].sqrt()
        column = cat([pivot, below[..., 1:] / pivot], -1)
        if j:
            column = cat([zeros_like(A[..., :j, 0]), column], -1)
        columns.append(column)
    return stack(columns, -1)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with A X = B (left=True) or X A = B, for A (..., n, n) triangular (upper or lower; only that triangle
    read; unitriangular: its diagonal taken as ones) and B (..., n, k) (or (..., k, n) when left=False)."""
    _square(A, "linalg.solve_triangular")
    if not isinstance(B, Tensor) or B.ndim < 2:
        raise RuntimeError("linalg.solve_triangular: B must have at least 2 dimensions")
    if not left:   # X A = B  <=>  A^T X^T = B^T, with the other triangle
        return solve_triangular(A.transpose(-2, -1), B.transpose(-2, -1), upper=not upper,
                                unitriangular=unitriangular).transpose(-2, -1)
    n = A.shape[-1]
    if B.shape[-2] != n:
        raise RuntimeError(f"linalg.solve_triangular: Incompatible shapes of A and B for the equation AX = B "
                           f"({A.shape[-2]}x{A.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})")
    batch = broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2]), "linalg.solve_triangular")
    B = B.expand(batch + tuple(B.shape[-2:]))
    rows = [None] * n
    for i in (range(n - 1, -1, -1) if upper else range(n)):
        value = B[..., i, :]                                    # (..., k)
        lo, hi = (i + 1, n) if upper else (0, i)                # the rows already solved
        if hi > lo:
            known = stack(rows[lo:hi], -2)                      # (..., hi - lo, k)
            value = value - matmul(A[..., i, lo:hi].unsqueeze(-2), known).squeeze(-2)
        rows[i] = value if unitriangular else value / A[..., i, i:i + 1]
    return stack(rows, -2)


def cholesky_solve(B, L, upper=False):
    """X with (L L^T) X = B (upper: (U^T U) X = B) for a Cholesky factor L (..., n, n) and B (..., n, k):
    two triangular solves, as PyTorch's torch.cholesky_solve."""
    _square(L, "cholesky_solve")
    if not isinstance(B, Tensor) or B.ndim < 2:
        raise RuntimeError(f"b should have at least 2 dimensions, but has {getattr(B, 'ndim', 0)} dimensions "
                           "instead")
    lower = L.transpose(-2, -1) if upper else L
    inner = solve_triangular(lower, B, upper=False)
    return solve_triangular(lower.transpose(-2, -1), inner, upper=True)


def cholesky_inverse(L, upper=False):
    """(L L^T)^-1 (upper: (U^T U)^-1) from a Cholesky factor (..., n, n), as PyTorch's torch.cholesky_inverse."""
    _square(L, "cholesky_inverse")
    identity = eye(L.shape[-1], dtype=L.dtype, device=L.device).expand(tuple(L.shape))
    return cholesky_solve(identity, L, upper=upper)
