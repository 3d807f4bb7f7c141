"""`MultivariateNormal`, parameterized by its covariance, precision or lower Cholesky factor (scale_tril), as
PyTorch's; everything goes through the factor L (Sigma = L L^T), computed by ggrad's composed Cholesky (meant
for small event sizes, tens of dimensions: ggrad/triangular.py)."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..autograd import Tensor
from ..autograd.factory import eye, generator as _host_generator, tensor
from ..autograd.ops import broadcast_shapes, flip, matmul
from ..triangular import LinAlgError, cholesky, solve_triangular
from .distribution import Distribution

__all__ = ["MultivariateNormal"]


def _float(value: Any) -> Tensor:
    value = value if isinstance(value, Tensor) else tensor(value)
    return value if value.dtype.is_float else value.float()


def _precision_to_scale_tril(P: Tensor) -> Tensor:
    """The lower Cholesky factor of P^-1, through the Cholesky factor of P with rows and columns reversed."""
    Lf = cholesky(flip(P, (-2, -1)))
    L_inv = flip(Lf, (-2, -1)).transpose(-2, -1)
    return solve_triangular(L_inv, eye(P.shape[-1], device=P.device), upper=False)


def mahalanobis(L: Tensor, x: Tensor) -> Tensor:
    """x^T (L L^T)^-1 x over the last dimension, L (..., n, n) lower triangular, batches broadcast."""
    solved = solve_triangular(L, x.unsqueeze(-1), upper=False).squeeze(-1)
    return (solved * solved).sum(-1)


def half_log_det(L: Tensor) -> Tensor:
    """log det(L L^T) / 2 = the sum of log L's diagonal."""
    return L.diagonal(dim1=-2, dim2=-1).log().sum(-1)


class MultivariateNormal(Distribution):
    """The multivariate normal distribution N(loc, Sigma), Sigma given by exactly one of `covariance_matrix`,
    `precision_matrix` (its inverse) or `scale_tril` (L lower triangular with a positive diagonal, Sigma = L L^T).

    Args:
        loc (Tensor): the mean, (..., n).
        covariance_matrix, precision_matrix, scale_tril (Tensor): (..., n, n), batches broadcast with loc's.
    """

    has_rsample = True

    def __init__(self, loc: Any, covariance_matrix: Any = None, precision_matrix: Any = None, scale_tril: Any = None,
                 validate_args: bool | None = None) -> None:
        loc = _float(loc)
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [(name, m) for name, m in (("covariance_matrix", covariance_matrix),
                                           ("precision_matrix", precision_matrix), ("scale_tril", scale_tril))
                 if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        name, matrix = given[0][0], _float(given[0][1])
        if matrix.ndim < 2:
            raise ValueError(f"{name} matrix must be at least two-dimensional, with optional leading batch "
                             "dimensions")
        batch = broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1]), "MultivariateNormal")
        super().__init__(batch, tuple(loc.shape[-1:]), validate_args)
        self.loc = loc.expand(batch + tuple(loc.shape[-1:]))
        self._given = (name, matrix)
        try:
            if name == "scale_tril":
                L = matrix
            elif name == "covariance_matrix":
                L = cholesky(matrix)
            else:
                L = _precision_to_scale_tril(matrix)
        except LinAlgError:   # PyTorch's ValueError when validating, else the factorization's error
            self._check(name, matrix, tensor(False), "PositiveDefinite()")
            raise
        if name == "scale_tril":
            diagonal = matrix.diagonal(dim1=-2, dim2=-1)
            self._check(name, matrix, (diagonal > 0) & diagonal.isfinite(), "LowerCholesky()")
        self._unbroadcasted_scale_tril = L

    def _matrix(self, name: str, compute: Any) -> Tensor:
        """The matrix given as `name`, else computed from L; expanded to the batch shape."""
        matrix = self._given[1] if self._given[0] == name else compute(self._unbroadcasted_scale_tril)
        return matrix.expand(self._batch_shape + self._event_shape * 2)

    @property
    def scale_tril(self) -> Tensor:
        return self._matrix("scale_tril", lambda L: L)

    @property
    def covariance_matrix(self) -> Tensor:
        return self._matrix("covariance_matrix", lambda L: matmul(L, L.transpose(-2, -1)))

    @property
    def precision_matrix(self) -> Tensor:
        def invert(L):
            inverse = solve_triangular(L, eye(self._event_shape[0], device=self.loc.device), upper=False)
            return matmul(inverse.transpose(-2, -1), inverse)
        return self._matrix("precision_matrix", invert)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        L = self._unbroadcasted_scale_tril
        return (L * L).sum(-1).expand(self._batch_shape + self._event_shape)

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        noise = tensor(_host_generator().standard_normal(shape).astype(np.float32), device=self.loc.device)
        return self.loc + matmul(self._unbroadcasted_scale_tril, noise.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value: Any) -> Tensor:
        diff = self._value(value) - self.loc
        L = self._unbroadcasted_scale_tril
        k = self._event_shape[0]
        return -0.5 * (k * math.log(2 * math.pi) + mahalanobis(L, diff)) - half_log_det(L)

    def entropy(self) -> Tensor:
        k = self._event_shape[0]
        value = 0.5 * k * (1.0 + math.log(2 * math.pi)) + half_log_det(self._unbroadcasted_scale_tril)
        return value.expand(self._batch_shape) if self._batch_shape else value
