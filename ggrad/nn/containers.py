"""Containers that register what they hold: `ModuleList`, `ModuleDict`, `ParameterList`, `ParameterDict`.

(`Sequential`, which also runs its modules in order, lives in `sequential.py`.)
"""

import operator
from collections.abc import Mapping

from ..autograd import Parameter, Tensor
from .module import Module


def _position(idx, n, container):
    """A list index (negative ones wrap) checked against the length `n`."""
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for a {container} of length {n}")
    return idx % n


class ModuleList(Module):
    """A list of modules, registered under their indices ('0', '1', ...).

    Args:
        modules (iterable of Module, optional): initial contents.
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _index(self, idx):
        return _position(idx, len(self), "ModuleList")

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        return self._modules[str(self._index(idx))]

    def __setitem__(self, idx, module):
        self.add_module(str(self._index(idx)), module)

    def __delitem__(self, idx):
        items = list(self._modules.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[self._index(idx)]
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList(list(self) + list(other))

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(): iterate over it and call its modules")


class _NamedStore:
    """The dict protocol of ModuleDict and ParameterDict over their registry (`_store()`); each class says
    how an item is registered (`__setitem__`)."""

    def __getitem__(self, key):
        return self._store()[key]

    def __delitem__(self, key):
        del self._store()[key]

    def __len__(self):
        return len(self._store())

    def __iter__(self):
        return iter(self._store())

    def __contains__(self, key):
        return key in self._store()

    def keys(self):
        return self._store().keys()

    def values(self):
        return self._store().values()

    def items(self):
        return self._store().items()

    def get(self, key, default=None):
        return self._store().get(key, default)

    def pop(self, key):
        return self._store().pop(key)

    def clear(self):
        self._store().clear()

    def update(self, entries):
        """Add (name, item) pairs from a mapping, another such container, or an iterable of pairs."""
        pairs = entries.items() if isinstance(entries, (Mapping, _NamedStore)) else entries
        for entry in pairs:
            if not isinstance(entry, (tuple, list)) or len(entry) != 2:
                raise TypeError(f"{type(self).__name__}.update: expected (name, value) pairs, got {entry!r}")
            self[entry[0]] = entry[1]


class ModuleDict(_NamedStore, Module):
    """An ordered dict of modules, registered under their keys.

    Args:
        modules (mapping or iterable of (str, Module) pairs, optional): initial contents.
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def _store(self):
        return self._modules

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(): look up its modules and call them")


def _as_parameter(value):
    """A Parameter as the containers store it: Parameters as given, other Tensors wrapped (as PyTorch)."""
    if isinstance(value, Parameter) or value is None:
        return value
    if isinstance(value, Tensor):
        return Parameter(value)
    raise TypeError(f"cannot assign {type(value).__name__} as a parameter (a Tensor or None is required)")


class ParameterList(Module):
    """A list of parameters, registered under their indices ('0', '1', ...); Tensors are made Parameters.

    Args:
        values (iterable of Tensor, optional): initial contents.
    """

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList(list(self._parameters.values())[idx])
        return self._parameters[str(_position(idx, len(self), "ParameterList"))]

    def __setitem__(self, idx, param):
        self.register_parameter(str(_position(idx, len(self), "ParameterList")), _as_parameter(param))

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value):
        self.register_parameter(str(len(self)), _as_parameter(value))
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return "\n".join(f"({i}): Parameter containing: [{p.dtype.name} of size {tuple(p.shape)}]"
                         for i, p in enumerate(self))


class ParameterDict(_NamedStore, Module):
    """An ordered dict of parameters, registered under their keys; Tensors are made Parameters.

    Args:
        parameters (mapping or iterable of (str, Tensor) pairs, optional): initial contents.
    """

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def _store(self):
        return self._parameters

    def __setitem__(self, key, param):
        self.register_parameter(key, _as_parameter(param))

    def extra_repr(self):
        return "\n".join(f"({k}): Parameter containing: [{p.dtype.name} of size {tuple(p.shape)}]"
                         for k, p in self.items())
