"""`ggrad.backends.cuda`: PyTorch's CUDA switches (matmul precision, attention kernels), recorded and read back.

`ggrad.set_float32_matmul_precision` and `matmul.allow_tf32` are one setting, as in PyTorch ("highest" is
allow_tf32 False). GGML's CUDA matmuls choose their precision themselves, so none of them changes a result.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Iterator

from .. import ggml

__all__ = ["matmul", "is_built", "set_float32_matmul_precision", "get_float32_matmul_precision", "enable_flash_sdp",
           "flash_sdp_enabled", "enable_mem_efficient_sdp", "mem_efficient_sdp_enabled", "enable_math_sdp",
           "math_sdp_enabled", "enable_cudnn_sdp", "cudnn_sdp_enabled", "sdp_kernel"]

_PRECISIONS = ("highest", "high", "medium")


class MatmulFlags:
    """`torch.backends.cuda.matmul`: allow_tf32 (backed by the float32 matmul precision) and the reduced
    precision reductions of float16 and bfloat16."""

    def __init__(self):
        self.precision = "highest"
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self) -> bool:
        return self.precision != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        self.precision = "high" if value else "highest"


matmul = MatmulFlags()


def set_float32_matmul_precision(precision: str) -> None:
    """"highest", "high" or "medium"; anything else warns and changes nothing, as PyTorch's."""
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "set_float32_matmul_precision call has no effect.", UserWarning, stacklevel=2)
        return
    matmul.precision = precision


def get_float32_matmul_precision() -> str:
    return matmul.precision


def is_built() -> bool:
    """Whether the installed GGML has its CUDA backend."""
    return ggml.has_backend("CUDA")


_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def enable_flash_sdp(enabled: bool) -> None:
    _sdp["flash"] = bool(enabled)


def flash_sdp_enabled() -> bool:
    return _sdp["flash"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    _sdp["mem_efficient"] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    return _sdp["mem_efficient"]


def enable_math_sdp(enabled: bool) -> None:
    _sdp["math"] = bool(enabled)


def math_sdp_enabled() -> bool:
    return _sdp["math"]


def enable_cudnn_sdp(enabled: bool) -> None:
    _sdp["cudnn"] = bool(enabled)


def cudnn_sdp_enabled() -> bool:
    return _sdp["cudnn"]


@contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True, enable_mem_efficient: bool = True,
               enable_cudnn: bool = True) -> Iterator[None]:
    """The attention-kernel flags set for the block, restored after it (PyTorch's deprecated context manager)."""
    saved = dict(_sdp)
    _sdp.update(flash=enable_flash, math=enable_math, mem_efficient=enable_mem_efficient, cudnn=enable_cudnn)
    try:
        yield
    finally:
        _sdp.update(saved)
