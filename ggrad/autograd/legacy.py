"""PyTorch's legacy constructors: `Tensor(data)`, `Tensor(2, 3)`, the typed `LongTensor`, `FloatTensor`, ...,
and `autograd.Variable` (a Tensor since PyTorch 0.4: `Variable(t, requires_grad=True)` is a leaf over t's values).

`Tensor(*sizes)` is a float32 tensor of that shape (ggrad fills it with zeros where PyTorch leaves memory
uninitialised), `Tensor(data)` a float32 copy of a sequence or array, `Tensor(t)` an alias of the Tensor t,
`Tensor()` an empty one. The typed classes do the same in their dtype; `isinstance(t, LongTensor)` is whether
t is an int64 tensor on the CPU, and `t.type(LongTensor)` converts, as in PyTorch. A tuple shape is data here
(ggrad's `.shape` is a plain tuple, PyTorch's a torch.Size taken as sizes): pass sizes as separate ints.
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import ggml
from . import factory
from .tensor import Tensor
from .torch_dtypes import BOOL, INT8, INT16, INT64, UINT8, resolve


def tensor_new(cls, *args, device=None):
    """`Tensor.__new__`: `Tensor(*sizes)`, `Tensor(data)`, `Tensor(t)`, `Tensor()` (float32)."""
    return construct(cls, *args, device=device)


def construct(cls, *args, device=None, dtype=None):
    """`cls(*args, device=)` as PyTorch's legacy constructor in `dtype` (float32 by default)."""
    name = getattr(cls, "__name__", "Tensor")
    dt = ggml.f32 if dtype is None else resolve(dtype)
    if not args:
        return factory.empty(0, dtype=dt, device=device)
    if all(isinstance(a, numbers.Integral) and not isinstance(a, (bool, np.bool_)) for a in args):
        negative = [int(a) for a in args if a < 0]
        if negative:
            raise RuntimeError(f"{name}(): Trying to create tensor with negative dimension {negative[0]}: "
                               f"{[int(a) for a in args]}")
        return factory.empty(*[int(a) for a in args], dtype=dt, device=device)
    if len(args) > 1:
        raise TypeError(f"{name}(): expected sizes (ints) or one sequence of data, got "
                        f"({', '.join(type(a).__name__ for a in args)})")
    data = args[0]
    if isinstance(data, Tensor):
        if dtype is not None and data.dtype != dt:
            raise TypeError(f"{name}(): expected a tensor of dtype {dt!r}, got {data.dtype!r}")
        return data.view_as(data) if device is None or ggml.device(device) == data.device else data.to(device)
    if not isinstance(data, (list, tuple, np.ndarray)):
        raise TypeError(f"{name}(): data must be a sequence (got {type(data).__name__})")
    return factory.tensor(data, dtype=dt, device=device)


class LegacyTensorType(type):
    """The type of `LongTensor` and friends: calling one constructs in its dtype; isinstance checks the dtype."""

    def __call__(cls, *args, device=None):
        return construct(cls, *args, device=device, dtype=cls.dtype)

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype and obj.device.type == "cpu"

    def __repr__(cls):
        return f"<class 'ggrad.{cls.__name__}'>"


def _legacy(name, dtype):
    return LegacyTensorType(name, (), {"dtype": dtype, "__doc__": f"PyTorch's legacy {name}: a {dtype!r} tensor.",
                                       "__module__": "ggrad"})


FloatTensor = _legacy("FloatTensor", ggml.f32)
HalfTensor = _legacy("HalfTensor", ggml.f16)
BFloat16Tensor = _legacy("BFloat16Tensor", ggml.bf16)
DoubleTensor = _legacy("DoubleTensor", ggml.dtypes.from_name("f64"))   # constructing one raises: no float64 compute
LongTensor = _legacy("LongTensor", INT64)
IntTensor = _legacy("IntTensor", ggml.i32)
ShortTensor = _legacy("ShortTensor", INT16)
CharTensor = _legacy("CharTensor", INT8)
ByteTensor = _legacy("ByteTensor", UINT8)
BoolTensor = _legacy("BoolTensor", BOOL)

TYPES = [FloatTensor, HalfTensor, BFloat16Tensor, DoubleTensor, LongTensor, IntTensor, ShortTensor, CharTensor,
         ByteTensor, BoolTensor]
BY_NAME = {f"{prefix}.{t.__name__}": t for t in TYPES for prefix in ("torch", "ggrad")}


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """`Variable(data, requires_grad=False)`: `data` itself, or a new leaf over its values that requires grad
    (as PyTorch's, where every Tensor is a Variable: `isinstance(t, Variable)` is True)."""

    def __new__(cls, data, requires_grad=False, volatile=False):
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        return data.detach().requires_grad_() if requires_grad else data
