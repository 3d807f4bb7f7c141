"""`weight_norm` and `remove_weight_norm` (PyTorch's torch.nn.utils.weight_norm): a weight re-parameterized as
w = g v / ||v||, the norm taken over every dimension but `dim`, so that its direction (v) and magnitude (g)
are learnt apart, as WaveNet- and HiFi-GAN-style audio models do.

The module's `name` parameter becomes `name_g` and `name_v`; a forward pre-hook recomputes `name` from them
before each forward, so gradients reach g and v. `remove_weight_norm` folds them back into one parameter.
"""

from ...autograd import Parameter, no_grad
from .norm_hooks import norm_hook, remove_norm_hook

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]


def norm_except_dim(v, dim):
    """The 2-norm of v over every dimension but `dim` (kept, size 1 elsewhere); over all of v for dim -1."""
    if dim == -1:
        return (v * v).sum().sqrt()
    d = dim % v.ndim
    others = tuple(i for i in range(v.ndim) if i != d)
    return (v * v).sum(others, keepdim=True).sqrt() if others else v.abs()


class WeightNorm:
    """The forward pre-hook that rebuilds `name` from `name_g` and `name_v`."""

    def __init__(self, name, dim):
        self.name, self.dim = name, dim

    def compute_weight(self, module):
        g, v = getattr(module, self.name + "_g"), getattr(module, self.name + "_v")
        return v * (g / norm_except_dim(v, self.dim))

    @staticmethod
    def apply(module, name, dim):
        if norm_hook(module, WeightNorm, name) is not None:
            raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        if dim is None:
            dim = -1
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        with no_grad():
            module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, dim).detach().clone()))
            module.register_parameter(name + "_v", Parameter(weight.detach().clone()))
        object.__setattr__(module, name, fn.compute_weight(module))
        fn.handle = module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        with no_grad():
            weight = self.compute_weight(module).detach().clone()
        object.__delattr__(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        module.register_parameter(self.name, Parameter(weight))
        self.handle.remove()

    def __call__(self, module, inputs):
        object.__setattr__(module, self.name, self.compute_weight(module))



def weight_norm(module, name="weight", dim=0):
    """Re-parameterize `module`'s parameter `name` as g v / ||v|| (norm over every dim but `dim`; dim None:
    the whole tensor). Returns the module."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Fold `name_g` and `name_v` back into the parameter `name`. ValueError if weight_norm was not applied."""
    return remove_norm_hook(module, WeightNorm, name, "weight_norm")
