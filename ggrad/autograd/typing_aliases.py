"""Names for the argument types of ggrad's public API, used in its type hints (PEP 484).

Each alias says what a function really accepts, as PyTorch's own hints do: `size=` takes one int or a
sequence of ints, a `dtype=` a dtype object or its name, an operand a Tensor or a value broadcast against
it. The annotations that use them are strings (`from __future__ import annotations`), so nothing here runs
on the hot path; `typing.get_type_hints` resolves them when asked (tests/test_type_hints.py does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ForwardRef, Sequence, Union

import numpy as np

from ..ggml import DType, Device

if TYPE_CHECKING:
    from .tensor import Tensor as _Tensor
else:
    # tensor.py cannot be imported here (it is still loading when factory.py, an importer of this module,
    # is first imported), so the name resolves in tensor.py's own namespace whenever a hint is evaluated
    _Tensor = ForwardRef("Tensor", module=__package__ + ".tensor")

Number = Union[int, float, bool]
"""A Python scalar, as accepted wherever PyTorch takes a `Number`."""

Size = Union[int, Sequence[int]]
"""A shape given as one int or a sequence of ints (`full(3, ...)`, `full((2, 3), ...)`)."""

Shape = tuple[int, ...]
"""A tensor's shape as ggrad returns it (numpy order), PyTorch's `torch.Size`."""

Dims = Union[int, Sequence[int]]
"""One dimension or several (`sum(dim=(0, 1))`); negative values count from the end."""

DTypeLike = Union[DType, str, np.dtype[Any], type]
"""A dtype: ggrad's (`ggrad.float16`), its name ("f16", "float16", "int64"), a numpy dtype or type."""

DeviceLike = Union[Device, str]
"""A device: a `ggrad.Device` or its name ("cpu", "cuda:0", "vulkan:1", GGML's "CUDA0")."""

TensorLike = Union[_Tensor, Number]
"""An operand: a Tensor, or a Python scalar taken as a constant (a numpy array is no operand: wrap it
in `ggrad.tensor`)."""

ArrayLike = Union[_Tensor, np.ndarray[Any, Any], Number, Sequence[Any]]
"""What `ggrad.tensor` reads: a Tensor, a numpy array, a scalar or (nested) sequences of them."""
