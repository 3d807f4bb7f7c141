"""PyTorch's deprecated `torch.cuda.amp` path: `autocast(...)` is `ggrad.autocast("cuda", ...)`, and GradScaler."""

from __future__ import annotations

from typing import Any

from ..amp import GradScaler
from ..amp import autocast as _autocast

__all__ = ["autocast", "GradScaler"]


def autocast(enabled: bool = True, dtype: Any = None, cache_enabled: bool = True) -> _autocast:
    """`ggrad.autocast("cuda", dtype=dtype, enabled=enabled)` (torch.cuda.amp.autocast's arguments)."""
    return _autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
