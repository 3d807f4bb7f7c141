"""Activation checkpointing (PyTorch's `torch.utils.checkpoint`): run a segment without recording it, and run it
again with recording inside the backward pass to get its gradients.

The forward pass keeps only the segment's inputs; its intermediates are not saved for backward, so GGML's
allocator can reuse their memory. The backward recomputes the segment from those inputs (with the random
state it had the first time, so dropout draws the same mask) and backpropagates through the recomputation,
which accumulates the gradients of the parameters it uses and returns those of its inputs.
`use_reentrant=True` (PyTorch's old default) gives gradients only when an input requires grad; False also
when only the segment's parameters do, and passes keyword arguments and `context_fn` through.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from typing import Any, Callable, ContextManager, Sequence

from ..autograd import Function, Tensor, grad_mode
from ..autograd.factory import default_generator, zeros
from ..autograd.grad_api import backward as _backward

__all__ = ["checkpoint", "checkpoint_sequential", "noop_context_fn"]


def noop_context_fn() -> tuple[ContextManager[None], ContextManager[None]]:
    """Two empty contexts: the default `context_fn` (around the forward, around the recomputation)."""
    return contextlib.nullcontext(), contextlib.nullcontext()


class _Checkpoint(Function):
    """Forward: the segment under no_grad. Backward: the segment again with grad, then its backward."""

    @staticmethod
    def forward(ctx, run, recompute_context, rng_state, _anchor, *args):
        ctx.run, ctx.recompute_context, ctx.rng_state = run, recompute_context, rng_state
        ctx.arg_is_tensor = [isinstance(a, Tensor) for a in args]
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        ctx.plain_args = [None if isinstance(a, Tensor) else a for a in args]
        with grad_mode.no_grad():
            return run(*args)

    @staticmethod
    def backward(ctx, *grads):
        saved = iter(ctx.saved_tensors)
        inputs = [next(saved).detach().requires_grad_(needs) if is_tensor else plain
                  for is_tensor, plain, needs in zip(ctx.arg_is_tensor, ctx.plain_args, ctx.needs_input_grad[4:])]
        now = default_generator.state_bytes()
        if ctx.rng_state is not None:
            default_generator.load_state_bytes(ctx.rng_state)
        try:
            with grad_mode.enable_grad(), ctx.recompute_context:
                outputs = ctx.run(*inputs)
        finally:
            default_generator.load_state_bytes(now)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads) if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        _backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None, None, None) + tuple(t.grad if isinstance(t, Tensor) and t.requires_grad else None
                                                for t in inputs)


def checkpoint(function: Callable[..., Any], *args: Any, use_reentrant: bool | None = None,
               context_fn: Callable[[], tuple[ContextManager[Any], ContextManager[Any]]] = noop_context_fn,
               determinism_check: str = "default", debug: bool = False, preserve_rng_state: bool = True,
               **kwargs: Any) -> Any:
    """`function(*args, **kwargs)`, its intermediates recomputed in the backward instead of kept.

    `use_reentrant` should be given (PyTorch warns without it and takes True). With True, keyword
    arguments and a `context_fn` are refused (ValueError), as PyTorch's. `determinism_check` ("default"
    or "none") and `debug` are accepted (the recomputation runs the same ops on the same data).
    """
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly; "
                      "use_reentrant=False is recommended", UserWarning, stacklevel=2)
        use_reentrant = True
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be 'default' or 'none', got {determinism_check!r}")
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if context_fn is not noop_context_fn:
            raise ValueError("Passing `context_fn` is only supported when use_reentrant=False.")
        if grad_mode.is_grad_enabled() and not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", UserWarning,
                          stacklevel=2)
    run = functools.partial(function, **kwargs) if kwargs else function
    forward_context, recompute_context = context_fn()
    # without reentrancy the parameters alone may need the gradient: an anchor that requires grad keeps the
    # output recording whenever grad mode is on
    anchor = zeros(0).requires_grad_(True) if not use_reentrant and grad_mode.is_grad_enabled() else None
    rng_state = default_generator.state_bytes() if preserve_rng_state else None
    with forward_context:
        return _Checkpoint.apply(run, recompute_context, rng_state, anchor, *args)


def checkpoint_sequential(functions: Sequence[Callable[[Any], Any]], segments: int, input: Any,  # noqa: A002
                          use_reentrant: bool | None = None, **kwargs: Any) -> Any:
    """Run `functions` (a list or an nn.Sequential) in `segments` checkpointed pieces, the last one recorded
    as usual (PyTorch's torch.utils.checkpoint.checkpoint_sequential)."""
    functions = list(functions.children()) if hasattr(functions, "children") else list(functions)
    size = len(functions) // segments

    def run(start, end):
        def forward(x):
            for fn in functions[start:end + 1]:
                x = fn(x)
            return x
        return forward

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, **kwargs)
    return run(end + 1, len(functions) - 1)(input)
