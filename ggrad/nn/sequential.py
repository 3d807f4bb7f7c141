"""`Sequential`: PyTorch's container of modules run in order.

    model = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 3))
    logits = model(x)

This is the container only, as `torch.nn.Sequential` is. The Keras-style model (`compile`, `fit`,
`evaluate`, `predict`, `summary`, `save`/`load`) is `ggrad.Sequential` (`ggrad.train.Sequential`), a
subclass of this one that inherits its trainer; any other module trains through
`ggrad.train.Trainer(model)`. They live in `ggrad.train` because a training loop needs optimizers,
and layers in `nn` never import `optim` or `train`.
"""

from collections import OrderedDict

import numpy as np

from .module import Module

_TRAINER_NAMES = ("compile", "fit", "evaluate", "predict", "summary", "save", "load", "get_config")


class Sequential(Module):
    """Modules called one after another: `Sequential(*layers)` or `Sequential(OrderedDict(name=layer))`.

    Indexing (an int gives a layer, a slice a new Sequential of the same class), `len`, iteration,
    `append`, `extend`, `insert`, `pop`, `+`, as in PyTorch.

    y = layers[-1](... layers[1](layers[0](x)))
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], (OrderedDict, dict)):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name in _TRAINER_NAMES:
                raise AttributeError(
                    f"'{type(self).__name__}' object has no attribute '{name}': nn.Sequential is PyTorch's "
                    f"container; the Keras-style model with {name}() is ggrad.Sequential (ggrad.train.Sequential), "
                    "and ggrad.train.Trainer(model) trains any module") from None
            raise

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"Sequential: {type(module).__name__} is not a Module subclass")
        super().add_module(name, module)

    def _index(self, idx):
        n = len(self)
        if not isinstance(idx, (int, np.integer)) or isinstance(idx, bool):
            raise TypeError(f"Sequential indices must be integers or slices, not {type(idx).__name__}")
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range for a Sequential of length {n}")
        return list(self._modules)[idx % n]

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._index(idx)]

    def __setitem__(self, idx, module):
        if not isinstance(module, Module):
            raise TypeError(f"Sequential: {type(module).__name__} is not a Module subclass")
        self._modules[self._index(idx)] = module   # in place: the layer keeps its position

    def __delitem__(self, idx):
        keys = list(self._modules)[idx] if isinstance(idx, slice) else [self._index(idx)]
        for key in keys:
            del self._modules[key]
        self._renumber()

    def _renumber(self):
        items = list(self._modules.values())
        self._modules.clear()
        for i, module in enumerate(items):
            self._modules[str(i)] = module

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise TypeError(f"can only add a Sequential to a Sequential, not {type(other).__name__}")
        return type(self)(*self, *other)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for module in modules:
            self.append(module)
        return self

    def insert(self, index, module):
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"insert: index {index} is out of range for a Sequential of length {n}")
        items = list(self._modules.values())
        items.insert(index % (n + 1) if index < 0 else index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)
        return self

    def pop(self, idx=-1):
        module = self[idx]
        del self[idx]
        return module

    def forward(self, x):
        for module in self:
            x = module(x)
        return x
