"""PyTorch's `torch.nn.attention.sdpa_kernel` and `SDPBackend`: the attention kernels a block allows.

The choice is recorded in the `ggrad.backends.cuda` flags (flash_sdp_enabled(), ...) for the block, as PyTorch
records it; GGML's lowering picks ggrad's attention kernels itself, so the results do not change.
"""

from __future__ import annotations

import contextlib
import enum
from typing import Iterator

from ..backends import cuda as _cuda_flags

__all__ = ["SDPBackend", "sdpa_kernel"]


class SDPBackend(enum.IntEnum):
    """The scaled-dot-product attention kernels, by PyTorch's names and values."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


@contextlib.contextmanager
def sdpa_kernel(backends: SDPBackend | list[SDPBackend], set_priority: bool = False) -> Iterator[None]:
    """Within the block, only `backends` (one SDPBackend or a list) are enabled in the backend flags."""
    chosen = [backends] if isinstance(backends, SDPBackend) else backends
    if not isinstance(chosen, (list, tuple)) or not all(isinstance(b, SDPBackend) for b in chosen):
        raise TypeError(f"sdpa_kernel: backends must be an SDPBackend or a list of them, got {backends!r}")
    with _cuda_flags.sdp_kernel(enable_flash=SDPBackend.FLASH_ATTENTION in chosen,
                                enable_math=SDPBackend.MATH in chosen,
                                enable_mem_efficient=SDPBackend.EFFICIENT_ATTENTION in chosen,
                                enable_cudnn=SDPBackend.CUDNN_ATTENTION in chosen):
        yield
