"""Whether operations record a graph for backward: `no_grad()`, `enable_grad()`, `set_grad_enabled()`,
`inference_mode()`.

The switch lives in a ContextVar, so threads and async tasks each see their own setting.
"""

from __future__ import annotations

import contextvars
import functools
from typing import Any, Callable, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])   # a decorated function keeps its own signature

_enabled = contextvars.ContextVar("ggrad_grad_enabled", default=True)


def is_grad_enabled() -> bool:
    return _enabled.get()


class set_grad_enabled:
    """Turn gradient recording on or off, as a function call, a context manager or a decorator."""

    def __init__(self, mode: bool) -> None:
        self._token = _enabled.set(bool(mode))

    def __enter__(self) -> set_grad_enabled:
        return self

    def __exit__(self, *exc: object) -> None:
        _enabled.reset(self._token)

    def __call__(self, fn: F) -> F:
        mode = _enabled.get()
        _enabled.reset(self._token)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return cast(F, wrapper)


class _Switch:
    mode = True

    def __enter__(self) -> _Switch:
        self._token = _enabled.set(self.mode)
        return self

    def __exit__(self, *exc: object) -> None:
        _enabled.reset(self._token)

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)
        return cast(F, wrapper)


class no_grad(_Switch):
    """Operations inside do not record gradients (inference, optimizer updates)."""
    mode = False


class enable_grad(_Switch):
    """Re-enable gradient recording inside a `no_grad` block."""
    mode = True


_inference = contextvars.ContextVar("ggrad_inference_mode", default=False)


def is_inference_mode_enabled() -> bool:
    return _inference.get()


class inference_mode:
    """PyTorch's inference_mode(mode=True): no gradient recording inside (a context manager or decorator).

    ggrad records no extra version or view bookkeeping that inference mode could skip, so it is no_grad
    plus the flag `is_inference_mode_enabled()`. As PyTorch's, `inference_mode(False)` turns both back:
    inference off and gradients on, even inside no_grad.
    """

    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode)

    def __enter__(self) -> inference_mode:
        self._tokens = (_inference.set(self.mode), _enabled.set(not self.mode))
        return self

    def __exit__(self, *exc: object) -> None:
        _enabled.reset(self._tokens[1])
        _inference.reset(self._tokens[0])

    def __call__(self, fn: F) -> F:
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)
        return cast(F, wrapper)
