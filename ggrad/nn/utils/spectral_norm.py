"""`spectral_norm` and `remove_spectral_norm` (PyTorch's torch.nn.utils.spectral_norm): a weight divided by its
largest singular value, estimated by power iteration, as GAN discriminators (SN-GAN, BigGAN) use it.

The parameter `name` becomes `name_orig`, with buffers `name_u` and `name_v` (the singular vectors' estimates).
Before each forward in training mode a pre-hook runs `n_power_iterations` steps v = W^T u / |W^T u|,
u = W v / |W v| without gradient, then sets `name` = W / (u . W v): the gradient flows through W in sigma too,
u and v held fixed, as PyTorch's. In eval mode the stored u and v are used as they are.
"""

from ...autograd import Parameter, no_grad
from ...autograd.factory import randn
from ..functional import normalize
from .norm_hooks import norm_hook, remove_norm_hook

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]


class SpectralNorm:
    """The forward pre-hook that recomputes `name` from `name_orig` and the power iteration's u, v."""

    def __init__(self, name, n_power_iterations, dim, eps):
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.n_power_iterations, self.dim, self.eps = name, n_power_iterations, dim, eps

    def reshape_weight_to_matrix(self, weight):
        """The weight as a matrix with `dim` as its rows."""
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.ndim) if d != self.dim])
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        matrix = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                detached = matrix.detach()
                for _ in range(self.n_power_iterations):
                    v = normalize(detached.t() @ u, dim=0, eps=self.eps)
                    u = normalize(detached @ v, dim=0, eps=self.eps)
                setattr(module, self.name + "_u", u.clone())
                setattr(module, self.name + "_v", v.clone())
        sigma = (u * (matrix @ v)).sum()
        return weight / sigma

    def remove(self, module):
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False).detach().clone()
        object.__delattr__(module, self.name)
        del module._parameters[self.name + "_orig"]
        del module._buffers[self.name + "_u"]
        del module._buffers[self.name + "_v"]
        module.register_parameter(self.name, Parameter(weight))
        self.handle.remove()

    def __call__(self, module, inputs):
        object.__setattr__(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        if norm_hook(module, SpectralNorm, name) is not None:
            raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        with no_grad():
            matrix = fn.reshape_weight_to_matrix(weight.detach())
            h, w = matrix.shape
            u = normalize(randn(h, dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
            v = normalize(randn(w, dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
        del module._parameters[name]
        module.register_parameter(name + "_orig", weight)
        object.__setattr__(module, name, weight.detach() * 1.0)
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        fn.handle = module.register_forward_pre_hook(fn)
        return fn



def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divide `module`'s parameter `name` by its spectral norm before each forward (dim: the output dim, 1 for
    the transposed convolutions, else 0). Returns the module."""
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name="weight"):
    """Fold the normalised weight back into the parameter `name`. ValueError if spectral_norm was not applied."""
    return remove_norm_hook(module, SpectralNorm, name, "spectral_norm")
