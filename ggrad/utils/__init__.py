"""`ggrad.utils`: helpers around training code (PyTorch's torch.utils); `ggrad.utils.data` loads batches,
`ggrad.utils.checkpoint` recomputes activations in the backward pass."""

from . import checkpoint, data

__all__ = ["checkpoint", "data"]
