"""torch.linalg's LU factorization with partial pivoting (lu, lu_factor) computed on the host, and on it
lu_unpack and lu_solve composed of ggrad ops.

numpy has no LU routine of its own: the factorization is Gaussian elimination with partial pivoting in
float64 on the host (LAPACK getrf's choice of pivot: the first entry of largest magnitude in the column, so
the permutation is PyTorch's), one synchronisation a call, batches (..., m, n) at once. lu's gradient is
PyTorch's formula for square, tall and wide matrices, written with ggrad ops; lu_unpack and lu_solve are
compositions of tril/triu, matmul and linalg.solve, so their gradients reach LU and B.
"""

from collections import namedtuple

import numpy as np

from ..arguments import TENSOR, require
from ..declaration import declare
from ..factory import eye, tensor
from ..function import Function
from ..tensor import Tensor
from .host_lapack import batch_prefix, check_matrix, constant, host, scalar_name
from .joins import cat
from .linear_solvers import solve
from .products import matmul

_lu_result = namedtuple("lu", ["P", "L", "U"])
_lu_factor_result = namedtuple("lu_factor", ["LU", "pivots"])
_lu_factor_ex_result = namedtuple("lu_factor_ex", ["LU", "pivots", "info"])
_lu_unpack_result = namedtuple("lu_unpack", ["P", "L", "U"])


def _mT(x):
    return x.transpose(-2, -1)


def lu64(A):
    """(LU packed, pivots (1-based, as LAPACK's ipiv), order) of float64 matrices (..., m, n): row i of
    A[order] is row i of L U, so A = P L U with P[order[i], i] = 1."""
    LU = np.array(A, dtype=np.float64)
    m, n = LU.shape[-2:]
    k = min(m, n)
    batch = LU.shape[:-2]
    LU = LU.reshape((-1, m, n))
    pivots = np.zeros((LU.shape[0], k), np.int32)
    order = np.broadcast_to(np.arange(m), (LU.shape[0], m)).copy()
    rows = np.arange(LU.shape[0])
    for j in range(k):
        p = j + np.argmax(np.abs(LU[:, j:, j]), axis=-1)
        pivots[:, j] = p + 1
        LU[rows, j], LU[rows, p] = LU[rows, p].copy(), LU[rows, j].copy()
        order[rows, j], order[rows, p] = order[rows, p].copy(), order[rows, j].copy()
        pivot = LU[:, j, j]
        safe = np.where(pivot == 0, 1.0, pivot)
        factors = np.where(pivot[:, None] == 0, 0.0, LU[:, j + 1:, j] / safe[:, None])
        LU[:, j + 1:, j] = factors
        LU[:, j + 1:, j + 1:] -= factors[:, :, None] * LU[:, j, None, j + 1:]
    return LU.reshape(batch + (m, n)), pivots.reshape(batch + (k,)), order.reshape(batch + (m,))


def _permutation(order, like):
    """P (..., m, m) float32 with P[order[i], i] = 1."""
    m = order.shape[-1]
    P = np.zeros(order.shape + (m,), np.float32)
    np.put_along_axis(P, order[..., :, None], 1.0, axis=-1)
    return constant(np.swapaxes(P, -1, -2), like)


def _square_lu_backward(L, U, g_L, g_U):
    """The gradient of B = L U (square, unit lower L): L^-T (tril(L^T G_L, -1) + triu(G_U U^T)) U^-T."""
    phi = matmul(_mT(L), g_L).tril(-1) + matmul(g_U, _mT(U)).triu()
    return _mT(solve(U, _mT(solve(_mT(L), phi))))


class _LU(Function):
    @staticmethod
    def forward(ctx, A):
        LU, _, order = lu64(host(A))
        m, n = LU.shape[-2:]
        k = min(m, n)
        L = np.tril(LU[..., :, :k], -1) + np.eye(m, k)
        U = np.triu(LU[..., :k, :])
        P, L, U = _permutation(order, A), constant(L, A), constant(U, A)
        ctx.mark_non_differentiable(P)
        ctx.save_for_backward(P, L, U)
        return P, L, U

    @staticmethod
    def backward(ctx, g_P, g_L, g_U):
        P, L, U = ctx.saved_tensors
        m, n = L.shape[-2], U.shape[-1]
        if m == n:
            g_B = _square_lu_backward(L, U, g_L, g_U)
        elif m < n:   # U = [U1 | U2] with U2 = L^-1 P^T A2: A2's gradient and L's share of it
            U1, U2, g_U1, g_U2 = U[..., :m], U[..., m:], g_U[..., :m], g_U[..., m:]
            g_A2 = solve(_mT(L), g_U2)
            g_B = cat([_square_lu_backward(L, U1, g_L - matmul(g_A2, _mT(U2)), g_U1), g_A2], -1)
        else:         # L = [L1; L2] with L2 = B2 U^-1: B2's gradient and U's share of it
            L1, L2, g_L1, g_L2 = L[..., :n, :], L[..., n:, :], g_L[..., :n, :], g_L[..., n:, :]
            g_B2 = _mT(solve(U, _mT(g_L2)))
            g_B = cat([_square_lu_backward(L1, U, g_L1, g_U - matmul(_mT(L2), g_B2)), g_B2], -2)
        return matmul(P, g_B)


def _check_pivot(pivot, op):
    if not pivot:
        raise RuntimeError(f"{op}: LU without pivoting is not implemented on the CPU")


def _check_lu_input(A, op):
    if isinstance(A, Tensor) and A.ndim >= 2 and not A.dtype.is_float:
        raise NotImplementedError(f'"lu_cpu" not implemented for \'{scalar_name(A.dtype)}\'')
    check_matrix(A, op)


def lu(A, *, pivot=True):
    """(P, L, U) with A = P L U, L unit lower triangular (m x k) and U upper triangular (k x n), k = min(m, n),
    of A (..., m, n), as torch.linalg.lu (a singular A is factored too). Computes what is pending and reads A
    to the host (one synchronisation); gradients reach A through L and U."""
    _check_lu_input(A, "linalg.lu")
    _check_pivot(pivot, "linalg.lu_factor")
    return _lu_result(*_LU.apply(A))


def lu_factor(A, *, pivot=True):
    """(LU, pivots): L below the diagonal and U on and above it in one (..., m, n) matrix, and the 1-based
    int32 row interchanges (LAPACK's ipiv), as torch.linalg.lu_factor; RuntimeError where U has a zero on its
    diagonal, as PyTorch's. One synchronisation; the gradient reaches A as lu's does."""
    LU, pivots, _ = _lu_factor(A, pivot, "torch.linalg.lu_factor", True)
    return _lu_factor_result(LU, pivots)


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """(LU, pivots, info) as torch.linalg.lu_factor_ex: info (int32, A's batch shape) is 0, or the 1-based
    index of U's first zero diagonal entry; check_errors=True raises as lu_factor does."""
    return _lu_factor_ex_result(*_lu_factor(A, pivot, "torch.linalg.lu_factor_ex", bool(check_errors)))


def _lu_factor(A, pivot, op, check_errors):
    if isinstance(A, Tensor) and A.ndim < 2:
        raise RuntimeError(f"torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(A.shape)} instead")
    _check_lu_input(A, "linalg.lu_factor")
    _check_pivot(pivot, "linalg.lu_factor")
    A64 = host(A)
    packed, pivots, _ = lu64(A64)
    zero = np.diagonal(packed, axis1=-2, axis2=-1) == 0
    info = np.where(zero.any(-1), zero.argmax(-1) + 1, 0).astype(np.int32)
    failed = np.flatnonzero(info.reshape(-1))
    if check_errors and failed.size:
        first = int(info.reshape(-1)[failed[0]])
        raise RuntimeError(f"{op}: {batch_prefix(A64, int(failed[0]))}U[{first},{first}] is zero and using it on "
                           "lu_solve would result in a division by zero. If you still want to perform the "
                           "factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
    _, L, U = _LU.apply(A)
    m, n = A.shape[-2:]
    if m > n:
        U = cat([U, (L[..., n:, :] * 0)], -2)
    elif m < n:
        L = cat([L, U[..., :, m:] * 0], -1)
    return L.tril(-1) + U.triu(), tensor(pivots, device=A.device), tensor(info, device=A.device)


def _pivot_order(pivots, m):
    """The row order (..., m) that the 1-based interchanges `pivots` (..., k) apply, in sequence."""
    swaps = pivots.reshape((-1, pivots.shape[-1])) - 1
    order = np.broadcast_to(np.arange(m), (swaps.shape[0], m)).copy()
    rows = np.arange(swaps.shape[0])
    for j in range(swaps.shape[1]):
        p = swaps[:, j]
        order[rows, j], order[rows, p] = order[rows, p].copy(), order[rows, j].copy()
    return order.reshape(pivots.shape[:-1] + (m,))


def _check_pivots(LU, pivots, op):
    require(op.split(".")[-1], "LU_pivots", pivots, TENSOR)
    if pivots.dtype.torch_name != "int32":
        raise RuntimeError(f"{op}: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype.\n"
                           "Note: this function is intended to be used with the output produced by "
                           "torch.linalg.lu_factor")
    if tuple(pivots.shape) != tuple(LU.shape[:-2]) + (min(LU.shape[-2:]),):
        raise RuntimeError(f"{op}: LU_pivots of shape {tuple(pivots.shape)} do not match LU_data of shape "
                           f"{tuple(LU.shape)}")


@declare
def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):  # noqa: N803 (PyTorch's names)
    """(P, L, U) from lu_factor's (LU, pivots), as torch.lu_unpack: L and U are LU's triangles (in the graph,
    gradients reach LU_data); P is read from the pivots (one synchronisation). Empty tensors for the parts
    not unpacked."""
    check_matrix(LU_data, "torch.lu_unpack", name="LU_data")
    _check_pivots(LU_data, LU_pivots, "torch.lu_unpack")
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    empty = constant(np.zeros(0), LU_data)
    P = _permutation(_pivot_order(host(LU_pivots).astype(np.int64), m), LU_data) if unpack_pivots else empty
    if not unpack_data:
        return _lu_unpack_result(P, empty, empty)
    L = LU_data[..., :, :k].tril(-1) + eye(m, k, device=LU_data.device)
    return _lu_unpack_result(P, L, LU_data[..., :k, :].triu())


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """X with A X = B (left=False: X A = B; adjoint: A^T in place of A) for A = P L U given as lu_factor's
    (LU, pivots), as torch.linalg.lu_solve: triangular solves (linalg.solve, on the host) in the graph, so
    gradients reach LU and B."""
    check_matrix(LU, "torch.linalg.lu_solve", square=True)
    if not isinstance(B, Tensor) or B.ndim < 2:
        raise RuntimeError("linalg.lu_solve: The input tensor B must have at least 2 dimensions.")
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        rows, columns = (B.shape[-2], B.shape[-1]) if left else (B.shape[-1], B.shape[-2])
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {rows}x{columns})")
    P, L, U = lu_unpack(LU, pivots)
    if not left:   # X A = B  <=>  A^T X^T = B^T
        return _mT(lu_solve(LU, pivots, _mT(B), adjoint=not adjoint))
    if adjoint:    # U^T L^T P^T X = B
        return matmul(P, solve(_mT(L), solve(_mT(U), B)))
    return solve(U, solve(L, matmul(_mT(P), B)))
