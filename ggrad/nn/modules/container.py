"""PyTorch's `torch.nn.modules.container` path: the containers."""

from ..sequential import Sequential
from ..containers import ModuleList, ModuleDict, ParameterList, ParameterDict

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]
