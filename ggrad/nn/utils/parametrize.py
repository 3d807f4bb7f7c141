"""`torch.nn.utils.parametrize`: a module's tensor computed on each access from unconstrained originals
(`register_parametrization`), as weight normalisation, spectral normalisation and user constraints use it.

The tensor `name` is removed from the module's parameters (or buffers); `module.parametrizations[name]` holds
the parametrization modules and the original(s): `original`, or `original0`, `original1`, ... when the first
parametrization's `right_inverse` returns several tensors. The module's class is swapped for a subclass
`Parametrized<Class>` with a property `name` = the parametrizations applied in turn to the originals; assigning
the property sets the originals through `right_inverse`. State-dict keys are PyTorch's
(`parametrizations.weight.original`).
"""

import contextlib

from ...autograd import Parameter, Tensor, no_grad
from ..containers import ModuleDict, ModuleList

__all__ = ["register_parametrization", "remove_parametrizations", "is_parametrized", "cached",
           "ParametrizationList"]

_cache = {}          # (id(module), name) -> value, inside `cached()`
_caching = [False]


@contextlib.contextmanager
def cached():
    """Within the block each parametrized tensor is computed once per module, as PyTorch's cached()."""
    _caching[0] = True
    try:
        yield
    finally:
        _caching[0] = False
        _cache.clear()


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, and its originals (see the module docstring)."""

    def __init__(self, modules, original, unsafe=False):
        super().__init__(modules)
        self.unsafe = unsafe
        with no_grad():
            new = original
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    new = module.right_inverse(new)
        as_parameter = isinstance(original, Parameter)
        make = (lambda t: Parameter(t.detach().clone(), requires_grad=original.requires_grad)) if as_parameter \
            else (lambda t: t.detach().clone())
        object.__setattr__(self, "is_tensor", isinstance(new, Tensor))
        if self.is_tensor:
            self._register_original("original", make(new), as_parameter)
        else:
            object.__setattr__(self, "ntensors", len(new))
            for i, t in enumerate(new):
                self._register_original(f"original{i}", make(t), as_parameter)

    def _register_original(self, name, value, as_parameter):
        if as_parameter:
            self.register_parameter(name, value)
        else:
            self.register_buffer(name, value)

    def _originals(self):
        return (self.original,) if self.is_tensor else tuple(getattr(self, f"original{i}")
                                                             for i in range(self.ntensors))

    def right_inverse(self, value):
        """Set the originals so that the parametrized tensor becomes `value`."""
        with no_grad():
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    value = module.right_inverse(value)
            values = (value,) if self.is_tensor else tuple(value)
            for original, new in zip(self._originals(), values):
                original.copy_(new)

    def forward(self):
        modules = list(self)
        x = modules[0](*self._originals())
        for module in modules[1:]:
            x = module(x)
        return x


def _property(name):
    def get(module):
        if not _caching[0]:
            return module.parametrizations[name]()
        key = (id(module), name)
        if key not in _cache:
            _cache[key] = module.parametrizations[name]()
        return _cache[key]

    def set_(module, value):
        module.parametrizations[name].right_inverse(value)

    return property(get, set_)


def is_parametrized(module, tensor_name=None):
    """Whether `module` has parametrizations (on `tensor_name`, when given)."""
    parametrizations = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Make `module.<tensor_name>` the value of `parametrization` applied to the tensor's original(s)."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        module.parametrizations[tensor_name].append(parametrization)
        return module
    if tensor_name not in module._parameters and tensor_name not in module._buffers:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a parametrized element with "
                         f"name '{tensor_name}'")
    original = getattr(module, tensor_name)
    chain = ParametrizationList([parametrization], original, unsafe=unsafe)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        cls = type(module)
        module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {"_unparametrized_class": cls})
        module.parametrizations = ModuleDict()
    module.parametrizations[tensor_name] = chain
    setattr(type(module), tensor_name, _property(tensor_name))
    return module


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Undo register_parametrization: `tensor_name` becomes a plain parameter (or buffer) again, holding the
    parametrized value (`leave_parametrized`) or the original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    chain = module.parametrizations[tensor_name]
    if chain.is_tensor:
        original = chain.original
        if leave_parametrized:
            with no_grad():
                value = getattr(module, tensor_name).detach()
            if tuple(value.shape) == tuple(original.shape):
                with no_grad():
                    original.copy_(value)
            else:
                original = Parameter(value.clone(), original.requires_grad) if isinstance(original, Parameter) \
                    else value.clone()
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is "
                             "parametrized in terms of a sequence of tensors.")
        with no_grad():
            value = getattr(module, tensor_name).detach().clone()
        original = Parameter(value, chain.original0.requires_grad) if isinstance(chain.original0, Parameter) \
            else value
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    if isinstance(original, Parameter):
        module.register_parameter(tensor_name, original)
    else:
        module.register_buffer(tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = type(module)._unparametrized_class
    return module
