"""ggrad.amp: automatic mixed precision, as PyTorch's torch.amp.

`autocast` runs the matrix products of a region in float16 or bfloat16 (the op table: autocast.py);
`GradScaler` scales the loss so that float16 gradients do not underflow, and skips steps that overflow.
"""

from .autocast import autocast, is_autocast_enabled, get_autocast_dtype, TABLE
from .grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "is_autocast_enabled", "get_autocast_dtype", "TABLE"]
