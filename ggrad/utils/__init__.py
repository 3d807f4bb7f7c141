"""`ggrad.utils`: helpers around training code (PyTorch's torch.utils); `ggrad.utils.data` loads batches."""

from . import data

__all__ = ["data"]
