"""`ggrad.compile` and `ggrad.compiler` (PyTorch's torch.compile): ggrad compiles already, so they hand the model back.

Every ggrad step is traced into one GGML graph, planned once and replayed while its trace repeats (the graph
cache, DESIGN.md "Execution"). That is the work torch.compile does for PyTorch, so `ggrad.compile(model)`
returns `model` itself, and its options (`fullgraph`, `dynamic`, `backend`, `mode`, `options`) change nothing.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["compile", "disable", "is_compiling", "reset"]


def compile(model: Callable[..., Any] | None = None, *, fullgraph: bool = False, dynamic: bool | None = None,
            backend: str | Callable[..., Any] | None = None, mode: str | None = None,
            options: dict[str, Any] | None = None, disable: bool = False) -> Any:  # noqa: A001 (PyTorch's name)
    """`model` itself (a Module or a function); without a model, a decorator that returns what it decorates."""
    if model is None:
        return lambda fn: compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                  options=options, disable=disable)
    if not callable(model):
        raise RuntimeError(f"compile: model must be a callable (a Module or a function), got {type(model).__name__}")
    return model


def disable(fn: Callable[..., Any] | None = None, recursive: bool = True) -> Any:
    """`fn` itself (there is no compiled region to leave); without fn, a decorator."""
    return fn if fn is not None else (lambda f: f)


def is_compiling() -> bool:
    """False: ggrad never traces Python code the way torch.compile does."""
    return False


def reset() -> None:
    """Nothing to forget: the graph cache rebuilds whatever changes by itself."""
