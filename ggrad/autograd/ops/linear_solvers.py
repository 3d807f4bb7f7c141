"""torch.linalg's inverse, determinants, solvers and matrix exponential, computed on the host.

GGML has no factorization: each call reads its input to the host (what is pending is computed first: one
synchronisation a call), runs numpy's LAPACK in float64 and gives the float32 result PyTorch gives. The
gradients are PyTorch's formulas written with ggrad ops (matmul, and these functions again where the formula
needs an inverse or a solve), so they are differentiable in turn. Batches (..., n, n) are handled at once.
"""

from collections import namedtuple

import numpy as np

from ..arguments import NUMBER, require
from ..autocast_hook import FLOAT32, autocast_op
from ..declaration import declare
from ..factory import eye
from ..function import Function
from ..tensor import Tensor
from .broadcast import broadcast_shapes
from .host_lapack import (LinAlgError, batch_prefix, check_matrix, constant, host, rank_cutoff,
                          scalar_name, singular_elements)
from .joins import cat
from .products import matmul
from .selection import where

_slogdet_result = namedtuple("slogdet", ["sign", "logabsdet"])
_lstsq_result = namedtuple("lstsq", ["solution", "residuals", "rank", "singular_values"])
_inv_ex_result = namedtuple("inv_ex", ["inverse", "info"])
_solve_ex_result = namedtuple("solve_ex", ["result", "info"])


def _mT(x):
    return x.transpose(-2, -1)


def _lapack_with_info(compute, A, *rest):
    """compute(A, *rest) in float64 and the int32 `info` of each matrix (0, or the first zero pivot of an exactly
    singular one, as LAPACK's getrf gives it); the results of singular matrices are nan."""
    info = np.zeros(A.shape[:-2], np.int32)
    try:
        return compute(A, *rest), info
    except np.linalg.LinAlgError:
        pass
    for index, pivot in singular_elements(A) or [(0, 1)]:
        info.reshape(-1)[index] = pivot
    result = compute(np.where(info[..., None, None] != 0, np.eye(A.shape[-1]), A), *rest)
    result[info != 0] = np.nan
    return result, info


def _first_failure(info):
    """(flat batch index, info) of the first failed matrix, or None."""
    failed = np.flatnonzero(info.reshape(-1))
    return (int(failed[0]), int(info.reshape(-1)[failed[0]])) if failed.size else None


class _Inverse(Function):
    @staticmethod
    def forward(ctx, A, op, check_errors):
        A64 = host(A)
        inverse, info = _lapack_with_info(np.linalg.inv, A64)
        failure = _first_failure(info)
        if check_errors and failure:
            raise LinAlgError(f"{op}: {batch_prefix(A64, failure[0])}The diagonal element {failure[1]} is zero, the "
                              "inversion could not be completed because the input matrix is singular.")
        inverse, info = constant(inverse, A), constant(info, A, np.int32)
        ctx.mark_non_differentiable(info)
        ctx.save_for_backward(inverse)
        return inverse, info

    @staticmethod
    def backward(ctx, g, g_info):
        inverse_t = _mT(ctx.saved_tensors[0])
        return -matmul(matmul(inverse_t, g), inverse_t), None, None


@autocast_op("linalg_inv", FLOAT32)
def inv(A):
    """A^-1 of a square matrix (or a batch (..., n, n)), as torch.linalg.inv; computes what is pending and reads
    A to the host (one synchronisation). LinAlgError for a singular matrix, as PyTorch's."""
    check_matrix(A, "linalg.inv", square=True)
    return _Inverse.apply(A, "linalg.inv", True)[0]


def inv_ex(A, *, check_errors=False):
    """(inverse, info) as torch.linalg.inv_ex: info (int32, A's batch shape) is 0, or for an exactly singular
    matrix its first zero pivot (its inverse is then nan); check_errors=True raises as inv does."""
    check_matrix(A, "linalg.inv_ex", square=True)
    return _inv_ex_result(*_Inverse.apply(A, "linalg.inv_ex", bool(check_errors)))


@declare(method=True)
def inverse(input):  # noqa: A002 (PyTorch's names)
    """torch.inverse: linalg.inv (computed on the host: one synchronisation)."""
    return inv(input)


class _Determinant(Function):
    @staticmethod
    def forward(ctx, A):
        A64 = host(A)
        det = np.array(np.linalg.det(A64))
        singular = det == 0   # an exactly zero pivot of LAPACK's LU (or a product that underflows)
        # singular matrices get PyTorch's zero gradient (det A^-T with det = 0): A^-1 of the identity there
        ctx.singular = constant(singular[..., None, None], A, bool) if singular.any() else None
        out = constant(det, A)
        ctx.save_for_backward(A, out)
        return out

    @staticmethod
    def backward(ctx, g):
        A, det = ctx.saved_tensors
        if ctx.singular is not None:
            A = where(ctx.singular, eye(A.shape[-1], device=A.device), A)
        return (g * det).unsqueeze(-1).unsqueeze(-1) * _mT(inv(A))


def linalg_det(A):
    """det(A) of a square matrix or a batch, as torch.linalg.det; computes what is pending and reads A to the
    host (one synchronisation). Its gradient det(A) A^-T (zero for an exactly singular A, as PyTorch's)."""
    check_matrix(A, "linalg.det", square=True)
    return _Determinant.apply(A)


@declare(method=True)
def det(input):  # noqa: A002
    """torch.det: linalg.det (computed on the host: one synchronisation)."""
    return linalg_det(input)


class _LogAbsDet(Function):
    @staticmethod
    def forward(ctx, A):
        sign, logabsdet = np.linalg.slogdet(host(A))
        ctx.save_for_backward(A)
        ctx.sign = constant(sign, A)
        ctx.mark_non_differentiable(ctx.sign)
        return ctx.sign, constant(logabsdet, A)

    @staticmethod
    def backward(ctx, g_sign, g):
        A, = ctx.saved_tensors
        return g.unsqueeze(-1).unsqueeze(-1) * _mT(inv(A))


def slogdet(A):
    """(sign, log|det A|) of a square matrix or a batch, as torch.linalg.slogdet (sign 0 and -inf for a singular
    one); computes what is pending and reads A to the host (one synchronisation). The gradient of logabsdet
    is A^-T (in the graph); sign has none."""
    check_matrix(A, "linalg.slogdet", square=True)
    sign, logabsdet = _LogAbsDet.apply(A)
    return _slogdet_result(sign, logabsdet)


declare(slogdet, method=True)


@declare(method=True)
def logdet(input):  # noqa: A002
    """log det(input), as torch.logdet: nan where the determinant is negative, -inf where it is zero (computed
    on the host: one synchronisation)."""
    check_matrix(input, "logdet", square=True)
    sign, logabsdet = _LogAbsDet.apply(input)
    return logabsdet + sign.log()


class _Solve(Function):
    @staticmethod
    def forward(ctx, A, B, op, check_errors):
        A64 = host(A)
        X, info = _lapack_with_info(np.linalg.solve, A64, host(B))
        failure = _first_failure(info)
        if check_errors and failure:
            raise LinAlgError(f"{op}: {batch_prefix(A64, failure[0])}The solver failed because the input matrix "
                              "is singular.")
        X, info = constant(X, A), constant(info, A, np.int32)
        ctx.mark_non_differentiable(info)
        ctx.save_for_backward(A, X)
        return X, info

    @staticmethod
    def backward(ctx, g, g_info):
        A, X = ctx.saved_tensors
        g_B = solve(_mT(A), g)
        return -matmul(g_B, _mT(X)), g_B, None, None


@autocast_op("linalg_solve", FLOAT32)
def solve(A, B, *, left=True):
    """X with A X = B (left=False: X A = B) for square A (..., n, n) and B (..., n, k) or a vector B (..., n),
    batch dims broadcast, as torch.linalg.solve; computes what is pending and reads A and B to the host (one
    synchronisation). LinAlgError for a singular A. Gradients: B's solve(A^T, G), A's -solve(A^T, G) X^T."""
    return _solve(A, B, left, "torch.linalg.solve", True)[0]


def solve_ex(A, B, *, left=True, check_errors=False):
    """(result, info) as torch.linalg.solve_ex: info (int32) is 0, or for an exactly singular A its first zero
    pivot (its result is then nan); check_errors=True raises as solve does."""
    return _solve_ex_result(*_solve(A, B, left, "torch.linalg.solve_ex", bool(check_errors)))


def _solve(A, B, left, op, check_errors):
    check_matrix(A, "linalg.solve", square=True)
    if not isinstance(B, Tensor):
        raise TypeError(f"linalg.solve(): argument 'B' (position 2) must be Tensor, not {type(B).__name__}")
    if B.dtype is not A.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
                           f"{A.dtype.torch_name} and B of type {B.dtype.torch_name} instead")
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    if vector:
        B = B.unsqueeze(-1)
    elif not left:
        X, info = _solve(_mT(A), _mT(B), True, op, check_errors)
        return _mT(X), info
    n = A.shape[-1]
    if B.shape[-2] != n:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = B ({n}x{n} and "
                           f"{B.shape[-2]}x{B.shape[-1]})")
    batch = broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2]), "linalg.solve")
    X, info = _Solve.apply(A.expand(batch + (n, n)), B.expand(batch + tuple(B.shape[-2:])), op, check_errors)
    return (X.squeeze(-1) if vector else X), info


class _PseudoInverse(Function):
    @staticmethod
    def forward(ctx, A, atol, rtol, hermitian):
        A64 = host(A)
        m, n = A64.shape[-2:]
        if hermitian:
            w, V = np.linalg.eigh(A64)
            keep = np.abs(w) > rank_cutoff(np.abs(w), atol, rtol, m, n)[..., None]
            inverse = (V * np.where(keep, 1.0 / np.where(keep, w, 1.0), 0.0)[..., None, :]) @ np.swapaxes(V, -1, -2)
        else:
            U, s, Vh = np.linalg.svd(A64, full_matrices=False)
            keep = s > rank_cutoff(s, atol, rtol, m, n)[..., None]
            s_inv = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0)
            inverse = np.swapaxes(Vh, -1, -2) * s_inv[..., None, :] @ np.swapaxes(U, -1, -2)
        out = constant(inverse, A)
        ctx.save_for_backward(A, out)
        return out

    @staticmethod
    def backward(ctx, g):
        A, P = ctx.saved_tensors
        m, n = A.shape[-2:]
        Pt, gt = _mT(P), _mT(g)
        if m <= n:
            K = matmul(gt, P)
            KPt = matmul(K, Pt)
            g_A = -_mT(matmul(P, K)) + KPt - matmul(matmul(A, P), KPt) + matmul(matmul(Pt, P), gt - matmul(K, A))
        else:
            K = matmul(P, gt)
            PtK = matmul(Pt, K)
            g_A = -_mT(matmul(K, P)) + matmul(matmul(gt - matmul(A, K), P), Pt) + PtK - matmul(matmul(PtK, P), A)
        return g_A, None, None, None


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudoinverse of A (..., m, n), singular values at or below max(atol, rtol * s_max)
    taken as zero, as torch.linalg.pinv; computes what is pending and reads A to the host (one
    synchronisation). Its gradient is PyTorch's formula in the graph (exact where the rank does not change)."""
    if not isinstance(A, Tensor) or A.ndim < 2 or A.dtype.torch_name != "float32":
        described = f"{scalar_name(A.dtype)}{{{list(A.shape)}}}" if isinstance(A, Tensor) else type(A).__name__
        raise RuntimeError(f"linalg.pinv({described}): expected a tensor with 2 or more dimensions of float, "
                           "double, cfloat or cdouble types")
    check_matrix(A, "linalg.pinv", square=hermitian)
    return _PseudoInverse.apply(A, atol, rtol, hermitian)


@declare(method=True)
@autocast_op("pinverse", FLOAT32)
def pinverse(input, rcond=1e-15):  # noqa: A002
    """torch.pinverse: linalg.pinv with rtol=rcond (computed on the host: one synchronisation)."""
    require("pinverse", "rcond", rcond, NUMBER)
    return pinv(input, rtol=rcond)


@autocast_op("linalg_lstsq", FLOAT32)
def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares solution X of A X = B for A (..., m, n) and B (..., m, k) (or a vector B (..., m)),
    as torch.linalg.lstsq: (solution, residuals, rank, singular_values), the last three as PyTorch's driver
    gives them ('gelsy', the default: the rank; 'gelsd'/'gelss': also the singular values; residuals where
    m > n, every matrix has full rank and the driver is not 'gelsy'). The solution is pinv(A) B, so it has
    PyTorch's gradient; computes what is pending and reads A and B to the host (one synchronisation)."""
    check_matrix(A, "torch.linalg.lstsq")
    if not isinstance(B, Tensor):
        raise TypeError(f"linalg.lstsq(): argument 'b' (position 2) must be Tensor, not {type(B).__name__}")
    if driver not in (None, "gelsy", "gelsd", "gelss", "gels"):
        raise RuntimeError(f"torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss), "
                           f"but got {driver}")
    vector = B.ndim == A.ndim - 1
    if vector:
        B = B.unsqueeze(-1)
    if B.ndim < 2 or B.shape[-2] != A.shape[-2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    driver = driver or "gelsy"
    m, n = A.shape[-2:]
    s = np.linalg.svd(host(A), compute_uv=False)
    rtol = rcond if rcond is not None and rcond > 0 else np.finfo(np.float32).eps * max(m, n)
    rank = (s > rtol * s.max(axis=-1, keepdims=True)).sum(-1) if s.shape[-1] else np.zeros(s.shape[:-1], int)
    X = matmul(pinv(A, rtol=rtol), B)
    residuals = constant(np.zeros(0), A)
    if driver != "gelsy" and m > n and np.all(rank == n):
        residuals = ((matmul(A, X) - B) ** 2).sum(-2)
        residuals = residuals.squeeze(-1) if vector else residuals
    ranks = constant(rank, A, np.int64) if driver != "gels" else constant(np.zeros(0), A, np.int64)
    values = constant(s, A) if driver in ("gelsd", "gelss") else constant(np.zeros(0), A)
    return _lstsq_result(X.squeeze(-1) if vector else X, residuals, ranks, values)


def _exp64(A):
    """e^A by scaling and squaring: A / 2^k with norm below 1/2, its Taylor series to float64 precision, then
    squared k times."""
    norms = np.abs(A).sum(-2).max(-1, initial=0.0)
    k = max(0, int(np.ceil(np.log2(max(float(norms.max(initial=0.0)), 1e-300) / 0.5)))) if A.size else 0
    X = A / 2.0 ** k
    term = result = np.broadcast_to(np.eye(A.shape[-1]), A.shape).copy()
    for i in range(1, 30):
        term = term @ X / i
        result = result + term
    for _ in range(k):
        result = result @ result
    return result


class _MatrixExp(Function):
    @staticmethod
    def forward(ctx, A):
        ctx.save_for_backward(A)
        return constant(_exp64(host(A)), A).to(A.dtype)

    @staticmethod
    def backward(ctx, g):
        # the Frechet derivative at A^T applied to G: the upper-right block of exp([[A^T, G], [0, A^T]])
        A, = ctx.saved_tensors
        n = A.shape[-1]
        At = _mT(A)
        block = cat([cat([At, g], -1), cat([g * 0, At], -1)], -2)
        return matrix_exp(block)[..., :n, n:]


@declare(method=True)
def matrix_exp(A):
    """e^A of a square matrix or a batch, as torch.linalg.matrix_exp / torch.matrix_exp (in A's dtype, float16
    and bfloat16 too); computes what is pending and reads A to the host (one synchronisation). Its gradient is
    matrix_exp of a 2n x 2n block matrix (in the graph, differentiable again)."""
    check_matrix(A, "linalg.matrix_exp", square=True, low_precision=True)
    return _MatrixExp.apply(A)


@declare(method=True)
def matrix_power(input, n):  # noqa: A002
    """input^n for square matrices (..., m, m) and an integer n, as torch.linalg.matrix_power: products by
    repeated squaring in the graph (floating point: ggrad's matmul; PyTorch also takes integers); a negative
    n inverts first (linalg.inv, on the host: one synchronisation), n = 0 gives identities."""
    if not isinstance(input, Tensor):
        raise TypeError(f"matrix_power(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"matrix_power(): argument 'n' (position 2) must be int, not {type(n).__name__}")
    if input.ndim < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 dimensions.")
    if input.shape[-1] != input.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{input.shape[-2]} by {input.shape[-1]} matrices")
    if n == 0:
        return eye(input.shape[-1], dtype=input.dtype, device=input.device).expand(tuple(input.shape)).contiguous()
    base, n = (inv(input), -n) if n < 0 else (input, n)
    result = None
    while n:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result
