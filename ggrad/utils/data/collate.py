"""`default_collate` (PyTorch's `torch.utils.data.default_collate`): a list of samples into one batch."""

from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from ...autograd import Tensor
from ...autograd.factory import tensor
from ...autograd.ops import stack

__all__ = ["default_collate"]


def default_collate(batch: Sequence[Any]) -> Any:
    """Stack a list of samples into a batch, field by field (PyTorch's rules for tensors, arrays, numbers)."""
    first = batch[0]
    if isinstance(first, Tensor):
        return stack(list(batch))
    if isinstance(first, np.ndarray):
        return tensor(np.stack(batch))
    if isinstance(first, bool):
        return tensor(np.array(batch))
    if isinstance(first, numbers.Integral):
        return tensor(np.array(batch, dtype=np.int64))
    if isinstance(first, numbers.Real):
        return tensor(np.array(batch, dtype=np.float64).astype(np.float32))
    if isinstance(first, (str, bytes)):
        return list(batch)
    if isinstance(first, dict):
        return {key: default_collate([sample[key] for sample in batch]) for key in first}
    if isinstance(first, (tuple, list)):
        if any(len(sample) != len(first) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [default_collate(list(field)) for field in zip(*batch)]
        return type(first)(*fields) if hasattr(first, "_fields") else fields   # a namedtuple stays one
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                    f"found {type(first).__name__}")


