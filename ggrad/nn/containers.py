"""Containers that register the modules they hold: `ModuleList` and `ModuleDict`.

(`Sequential`, which also runs its modules in order, lives in `sequential.py`.)
"""

import operator
from collections import OrderedDict

from .module import Module


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
        idx = operator.index(idx)
        n = len(self)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range for a ModuleList of length {n}")
        return idx % n

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


class ModuleDict(Module):
    """An ordered dict of modules, registered under their keys.

    Args:
        modules (mapping or iterable of (str, Module) pairs, optional): initial contents.
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def pop(self, key):
        module = self._modules[key]
        del self._modules[key]
        return module

    def clear(self):
        self._modules.clear()

    def update(self, modules):
        pairs = modules.items() if isinstance(modules, (dict, OrderedDict, ModuleDict)) else modules
        for entry in pairs:
            if not isinstance(entry, (tuple, list)) or len(entry) != 2:
                raise TypeError(f"ModuleDict.update: expected (name, module) pairs, got {entry!r}")
            self[entry[0]] = entry[1]

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(): look up its modules and call them")
