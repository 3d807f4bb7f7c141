"""`ggrad.jit`: the TorchScript names model code uses (PyTorch's torch.jit), for code that runs as Python.

ggrad has no TorchScript: every step is Python building one cached GGML graph (ggrad.compiler). So `script`
and `trace` hand back what they are given, the decorators (`ignore`, `unused`, `export`, `interface`) leave
functions as they are, `is_scripting()` and `is_tracing()` are False (code guarded by them takes its Python
path, as in eager PyTorch), and `annotate(type, value)` is `value`. TorchScript archives (`jit.save`,
`jit.load`) have no counterpart: save state dicts with `ggrad.save`.
"""

from __future__ import annotations

from typing import Any, Callable, Final  # noqa: F401  (torch.jit.Final)

__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "interface", "is_scripting",
           "is_tracing", "annotate", "Final"]


def script(obj: Any, optimize: Any = None, _frames_up: int = 0, _rcb: Any = None,
           example_inputs: Any = None) -> Any:
    """`obj` itself (a Module, function or class): it runs as Python."""
    return obj


def trace(func: Any, example_inputs: Any = None, *args: Any, **kwargs: Any) -> Any:
    """`func` itself (a Module or function): every call runs it as Python, with its own control flow."""
    if not callable(func):
        raise RuntimeError(f"trace: expected a Module or a function, got {type(func).__name__}")
    return func


def trace_module(mod: Any, inputs: Any = None, *args: Any, **kwargs: Any) -> Any:
    """`mod` itself."""
    return mod


def _decorator(fn: Callable[..., Any] | None = None, **_: Any) -> Any:
    """A decorator usable bare (@ignore) or called (@ignore(drop=True)) that returns the function as it is."""
    return fn if callable(fn) else (lambda f: f)


ignore = unused = export = interface = _decorator


def is_scripting() -> bool:
    """False: nothing runs under TorchScript here."""
    return False


def is_tracing() -> bool:
    """False: nothing runs under torch.jit.trace here."""
    return False


def annotate(the_type: Any, the_value: Any) -> Any:
    """`the_value` (the type is TorchScript's hint)."""
    return the_value
