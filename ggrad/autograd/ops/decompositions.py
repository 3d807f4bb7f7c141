"""torch.linalg's QR, SVD and symmetric eigendecomposition, computed on the host, with their gradients.

GGML has none of them: each call reads its input to the host (what is pending is computed first: one
synchronisation a call), runs numpy's LAPACK in float64 (the same Householder and divide-and-conquer routines
PyTorch calls, so signs and orders agree) and gives PyTorch's float32 results. The gradients are PyTorch's
formulas written with ggrad ops over the saved factors (a solve on the host where the QR one needs R^-T).
Outputs that get no gradient are left out of the formulas, as PyTorch does (svdvals' gradient stays finite
for repeated singular values).
"""

from collections import namedtuple

import numpy as np

from ..arguments import FLAG, require
from ..autocast_hook import FLOAT32, autocast_op
from ..declaration import declare
from ..factory import eye, zeros
from ..function import Function
from .array_builders import diag_embed
from .host_lapack import check_matrix, constant, host, rank_cutoff
from .joins import cat
from .linear_solvers import solve
from .products import matmul

_qr_result = namedtuple("qr", ["Q", "R"])
_svd_result = namedtuple("svd", ["U", "S", "Vh"])
_torch_svd_result = namedtuple("svd", ["U", "S", "V"])
_eigh_result = namedtuple("eigh", ["eigenvalues", "eigenvectors"])


def _mT(x):
    return x.transpose(-2, -1)


def _copy_lower_to_upper(M):
    return M.tril() + _mT(M.tril(-1))


def _qr_backward_tall(Q, R, g_Q, g_R):
    """The gradient for A = Q R with A (..., m, n), m >= n (Q m x n, R n x n): (G_Q + Q copyltu(M)) R^-T,
    M = R G_R^T - G_Q^T Q."""
    M = matmul(R, _mT(g_R)) - matmul(_mT(g_Q), Q)
    b = g_Q + matmul(Q, _copy_lower_to_upper(M))
    return _mT(solve(R, _mT(b)))


class _QR(Function):
    @staticmethod
    def forward(ctx, A, mode):
        Q, R = np.linalg.qr(host(A), mode="complete" if mode == "complete" else "reduced")
        ctx.mode = mode
        ctx.set_materialize_grads(False)
        q, r = constant(Q, A), constant(R, A)
        ctx.save_for_backward(A, q, r)
        return (constant(np.zeros(0), A) if mode == "r" else q), r

    @staticmethod
    def backward(ctx, g_Q, g_R):
        A, Q, R = ctx.saved_tensors
        m, n = A.shape[-2:]
        if ctx.mode == "r":
            raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
                               "Please use linalg.qr(A, mode='reduced') if you are going to differentiate through "
                               "linalg.qr.")
        if ctx.mode == "complete" and m > n:
            raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
        g_Q = Q * 0 if g_Q is None else g_Q
        g_R = R * 0 if g_R is None else g_R
        if m >= n:
            return _qr_backward_tall(Q, R, g_Q, g_R), None
        # A = [X | Y] with X = Q U square: Y = Q V gives G_Y = Q G_V, and X's gradient with G_Q + Y G_V^T
        Y, g_U, g_V = A[..., m:], g_R[..., :m], g_R[..., m:]
        g_X = _qr_backward_tall(Q, R[..., :m], g_Q + matmul(Y, _mT(g_V)), g_U)
        return cat([g_X, matmul(Q, g_V)], -1), None


@autocast_op("linalg_qr", FLOAT32)
def linalg_qr(A, mode="reduced"):
    """(Q, R) with A = Q R, Q orthonormal columns and R upper triangular, of A (..., m, n), as torch.linalg.qr:
    mode 'reduced' (Q m x k, R k x n, k = min(m, n)), 'complete' (Q m x m, R m x n) or 'r' (Q empty).
    Computes what is pending and reads A to the host (one synchronisation)."""
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           "or 'complete'")
    check_matrix(A, "linalg.qr")
    return _qr_result(*_QR.apply(A, mode))


@declare(method=True)
@autocast_op("qr", FLOAT32)
def qr(input, some=True):  # noqa: A002
    """torch.qr: linalg.qr with mode 'reduced' (some=True) or 'complete' (computed on the host: one
    synchronisation)."""
    require("qr", "some", some, FLAG)
    return linalg_qr(input, "reduced" if some else "complete")


class _SVD(Function):
    @staticmethod
    def forward(ctx, A, full_matrices):
        U, s, Vh = np.linalg.svd(host(A), full_matrices=full_matrices)
        ctx.set_materialize_grads(False)
        u, s, vh = constant(U, A), constant(s, A), constant(Vh, A)
        ctx.save_for_backward(u, s, vh)
        return u, s, vh

    @staticmethod
    def backward(ctx, g_U, g_S, g_Vh):
        U, S, Vh = ctx.saved_tensors
        m, k, n = U.shape[-2], S.shape[-1], Vh.shape[-1]
        U, Vh = U[..., :k], Vh[..., :k, :]
        if g_U is None and g_Vh is None:
            return (None if g_S is None else matmul(U * g_S.unsqueeze(-2), Vh)), None
        g_U = None if g_U is None else g_U[..., :k]
        g_V = None if g_Vh is None else _mT(g_Vh[..., :k, :])
        V = _mT(Vh)
        S2 = S * S
        E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + eye(k, device=S.device)   # S_j^2 - S_i^2, 1 on the diagonal
        inner = 0
        if g_U is not None:
            UtgU = matmul(_mT(U), g_U)
            inner = (UtgU - _mT(UtgU)) * S.unsqueeze(-2) / E
        if g_V is not None:
            VtgV = matmul(_mT(V), g_V)
            inner = inner + S.unsqueeze(-1) * (VtgV - _mT(VtgV)) / E
        if g_S is not None:
            inner = inner + diag_embed(g_S)
        if m > k and g_U is not None:   # the part of G_U outside U's span
            g_U_scaled = g_U / S.unsqueeze(-2)
            g_A = matmul(U, inner) + g_U_scaled - matmul(U, matmul(_mT(U), g_U_scaled))
            return matmul(g_A, Vh), None
        if n > k and g_V is not None:   # the part of G_V outside V's span
            g_V_scaled = _mT(g_V / S.unsqueeze(-2))
            g_A = matmul(inner, Vh) + g_V_scaled - matmul(matmul(g_V_scaled, V), Vh)
            return matmul(U, g_A), None
        return matmul(matmul(U, inner), Vh), None


@autocast_op("linalg_svd", FLOAT32)
def linalg_svd(A, full_matrices=True, *, driver=None):
    """(U, S, Vh) with A = U diag(S) Vh, S descending, of A (..., m, n), as torch.linalg.svd (full_matrices:
    U m x m and Vh n x n, else m x k and k x n). Computes what is pending and reads A to the host (one
    synchronisation). The gradient is PyTorch's (U and Vh's parts are not defined for repeated singular
    values, as in PyTorch)."""
    check_matrix(A, "linalg.svd")
    return _svd_result(*_SVD.apply(A, bool(full_matrices)))


@autocast_op("linalg_svdvals", FLOAT32)
def svdvals(A, *, driver=None):
    """The singular values of A (..., m, n), descending, as torch.linalg.svdvals (computed on the host: one
    synchronisation); gradient U diag(G) Vh."""
    check_matrix(A, "linalg.svdvals")
    return _SVD.apply(A, False)[1]


@declare(method=True)
@autocast_op("svd", FLOAT32)
def svd(input, some=True, compute_uv=True):  # noqa: A002
    """torch.svd: (U, S, V) with input = U diag(S) V^T (some=True: the reduced factors); compute_uv=False gives
    zero U (m x m) and V (n x n), as PyTorch. Computed on the host: one synchronisation."""
    require("svd", "some", some, FLAG)
    require("svd", "compute_uv", compute_uv, FLAG)
    check_matrix(input, "linalg.svd")
    if not compute_uv:
        m, n = input.shape[-2:]
        batch = tuple(input.shape[:-2])
        return _torch_svd_result(zeros(batch + (m, m), device=input.device), svdvals(input),
                                 zeros(batch + (n, n), device=input.device))
    U, S, Vh = linalg_svd(input, full_matrices=not some)
    return _torch_svd_result(U, S, _mT(Vh))


class _Eigh(Function):
    @staticmethod
    def forward(ctx, A, UPLO):
        w, V = np.linalg.eigh(host(A), UPLO=UPLO)
        ctx.set_materialize_grads(False)
        w, V = constant(w, A), constant(V, A)
        ctx.save_for_backward(w, V)
        return w, V

    @staticmethod
    def backward(ctx, g_w, g_V):
        w, V = ctx.saved_tensors
        inner = 0 if g_w is None else diag_embed(g_w)
        if g_V is not None:
            n = w.shape[-1]
            VtgV = matmul(_mT(V), g_V)
            E = w.unsqueeze(-2) - w.unsqueeze(-1) + eye(n, device=w.device)   # w_j - w_i, 1 on the diagonal
            inner = inner + (VtgV - _mT(VtgV)) * 0.5 / E
        return matmul(matmul(V, inner), _mT(V)), None


def _check_uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


@autocast_op("linalg_eigh", FLOAT32)
def eigh(A, UPLO="L"):
    """(eigenvalues ascending, eigenvectors as columns) of a symmetric A (..., n, n), only its UPLO triangle
    read, as torch.linalg.eigh. Computes what is pending and reads A to the host (one synchronisation). The
    gradient is PyTorch's (the eigenvectors' part is not defined for repeated eigenvalues)."""
    check_matrix(A, "linalg.eigh", square=True)
    _check_uplo(UPLO)
    return _eigh_result(*_Eigh.apply(A, UPLO))


@autocast_op("linalg_eigvalsh", FLOAT32)
def eigvalsh(A, UPLO="L"):
    """The eigenvalues (ascending) of a symmetric A (..., n, n), as torch.linalg.eigvalsh (computed on the
    host: one synchronisation); gradient V diag(G) V^T."""
    check_matrix(A, "linalg.eigvalsh", square=True)
    _check_uplo(UPLO)
    return _Eigh.apply(A, UPLO)[0]


@autocast_op("linalg_matrix_rank", FLOAT32)
def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    """The number of singular values (|eigenvalues| where hermitian) above max(atol, rtol * the largest), as
    torch.linalg.matrix_rank (rtol defaults to eps * max(m, n) where neither is given): an int64 tensor of
    A's batch shape. Computes what is pending and reads A to the host (one synchronisation)."""
    check_matrix(A, "torch.linalg.matrix_rank", square=hermitian, name="input")
    A64 = host(A)
    s = np.abs(np.linalg.eigvalsh(A64)) if hermitian else np.linalg.svd(A64, compute_uv=False)
    cutoff = rank_cutoff(s, atol, rtol, *A64.shape[-2:])
    return constant((s > cutoff[..., None]).sum(-1), A, np.int64)
