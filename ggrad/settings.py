"""PyTorch's process-wide switches, as ggrad answers them: the default dtype, deterministic algorithms,
inter-op threads.

ggrad's default floating dtype is float32 and stays so: `set_default_dtype(float32)` is accepted, float64 is
refused as everywhere (GGML computes no float64), and the half types raise TypeError saying how to get
half-precision tensors. GGML's ops give the same results run after run for one build and thread count, so
`use_deterministic_algorithms` is recorded and read back, as is the inter-op thread count (ggrad runs one
graph at a time per device; `set_num_threads` sets the threads inside an op).
"""

from __future__ import annotations

import numbers

from . import ggml
from .autograd.torch_dtypes import refuse_float64, resolve

__all__ = ["get_default_dtype", "set_default_dtype", "use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
           "set_num_interop_threads", "get_num_interop_threads"]

_deterministic = {"mode": False, "warn_only": False}
_interop_threads = [1]


def get_default_dtype() -> ggml.DType:
    """float32: the dtype of floats made from Python numbers and of the float factories."""
    return ggml.f32


def set_default_dtype(d: object) -> None:
    """Accept float32 (the default already); refuse other dtypes with the reason."""
    dt = resolve(d)
    if not dt.is_float:
        raise TypeError("only floating-point types are supported as the default type")
    refuse_float64(dt, "set_default_dtype")
    if dt is not ggml.f32:
        raise TypeError(f"set_default_dtype: ggrad's default dtype stays float32 (got {dt!r}); make half-precision "
                        "tensors with dtype=, or convert a model with .half() / .to(dtype)")


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Record the switch (GGML's ops are deterministic for one build and thread count)."""
    if not isinstance(mode, bool) or not isinstance(warn_only, bool):
        raise TypeError(f"use_deterministic_algorithms: mode and warn_only must be bool, got {mode!r}, {warn_only!r}")
    _deterministic.update(mode=mode, warn_only=warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _deterministic["mode"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _deterministic["warn_only"]


def set_num_interop_threads(num: int) -> None:
    """Record the inter-op thread count (a positive int): ggrad runs one graph at a time per device."""
    if isinstance(num, bool) or not isinstance(num, numbers.Integral) or num <= 0:
        raise RuntimeError(f"Expected positive number of threads, got {num!r}")
    _interop_threads[0] = int(num)


def get_num_interop_threads() -> int:
    return _interop_threads[0]
