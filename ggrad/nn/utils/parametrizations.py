"""`torch.nn.utils.parametrizations`: weight_norm and spectral_norm as parametrizations (parametrize.py), the
forms PyTorch recommends over the hook-based nn.utils.weight_norm / spectral_norm (and that transformers'
audio models pick when they exist). Orthogonal is not built: it needs a matrix exponential or a
Householder/Cayley map, which GGML's ops do not give (docs/pytorch.md)."""

from ...autograd import Tensor, no_grad
from ...autograd.factory import randn
from ..functional import normalize
from ..module import Module
from .parametrize import register_parametrization
from .weight_norm import norm_except_dim

__all__ = ["weight_norm", "spectral_norm"]


class _WeightNorm(Module):
    """weight = g v / ||v|| over every dim but `dim`: originals g (original0) and v (original1)."""

    def __init__(self, dim):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight):
        return norm_except_dim(weight, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Re-parameterize `module.<name>` as g v / ||v|| (norm over every dim but `dim`). Returns the module."""
    register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    """weight / sigma, sigma the largest singular value by power iteration on the buffers _u and _v (15 steps
    at registration, `n_power_iterations` per forward in training, none in eval), as PyTorch's."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        ndim = weight.ndim
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps, self.n_power_iterations = eps, n_power_iterations
        if ndim > 1:
            matrix = self._reshape_weight_to_matrix(weight)
            h, w = matrix.shape
            self.register_buffer("_u", normalize(randn(h, dtype=weight.dtype, device=weight.device), dim=0, eps=eps))
            self.register_buffer("_v", normalize(randn(w, dtype=weight.dtype, device=weight.device), dim=0, eps=eps))
            self._power_method(matrix, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.ndim) if d != self.dim])
        return weight.reshape(weight.shape[0], -1)

    def _power_method(self, matrix, iterations):
        with no_grad():
            matrix = matrix.detach()
            u, v = self._u, self._v
            for _ in range(iterations):
                u = normalize(matrix @ v, dim=0, eps=self.eps)
                v = normalize(matrix.t() @ u, dim=0, eps=self.eps)
            self._u, self._v = u.clone(), v.clone()

    def forward(self, weight):
        if weight.ndim == 1:
            return normalize(weight, dim=0, eps=self.eps)
        matrix = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(matrix, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = (u * (matrix @ v)).sum()
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Re-parameterize `module.<name>` as W / sigma(W) (dim: the output dim, 1 for the transposed convolutions,
    else 0). Returns the module."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
