"""Module hooks, as PyTorch's: forward pre-hooks, forward hooks, full backward hooks and backward
pre-hooks.

`Module.__call__` looks for a module's `_hooks` and, only when there are some, calls through
`call_with_hooks`. Backward hooks are identity Functions around the module's Tensor inputs and
outputs (`_HookPoint`): the one on the outputs sees `grad_output` (and runs the backward pre-hooks),
the one on the inputs sees `grad_input` and runs the backward hooks with both.
"""

import warnings
from collections import OrderedDict

from ..autograd import Function, Tensor, is_grad_enabled
from ..autograd.hooks import RemovableHandle


class _Hooks:
    """The hooks of one module, each dict in calling order (keyed by handle id)."""

    def __init__(self):
        self.forward_pre, self.forward = OrderedDict(), OrderedDict()
        self.backward_pre, self.backward = OrderedDict(), OrderedDict()
        self.with_kwargs, self.always_call = set(), set()


class ModuleHooks:
    """The hook registration methods of `Module` (each returns a handle whose `remove()` undoes it)."""

    def _add_hook(self, kind, hook, prepend):
        hooks = self.__dict__.get("_hooks")
        if hooks is None:
            hooks = _Hooks()
            object.__setattr__(self, "_hooks", hooks)
        table = getattr(hooks, kind)
        handle = RemovableHandle(table)
        table[handle.id] = hook
        if prepend:
            table.move_to_end(handle.id, last=False)
        return handle, hooks

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """`hook(module, args)` (or `hook(module, args, kwargs)` with_kwargs) before forward; it may
        return new args (a tuple, or one value) or, with_kwargs, a tuple `(args, kwargs)`."""
        handle, hooks = self._add_hook("forward_pre", hook, prepend)
        if with_kwargs:
            hooks.with_kwargs.add(handle.id)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """`hook(module, args, output)` (or `hook(module, args, kwargs, output)`) after forward; a
        value it returns replaces the output. always_call: also run when forward raises."""
        handle, hooks = self._add_hook("forward", hook, prepend)
        if with_kwargs:
            hooks.with_kwargs.add(handle.id)
        if always_call:
            hooks.always_call.add(handle.id)
        return handle

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """`hook(module, grad_output)` when the gradients of the outputs are known; it may return a
        replacement tuple."""
        return self._add_hook("backward_pre", hook, prepend)[0]

    def register_full_backward_hook(self, hook, prepend=False):
        """`hook(module, grad_input, grad_output)` when the gradients of the Tensor inputs are known;
        it may return a replacement `grad_input` tuple. An entry is None for a non-Tensor argument."""
        return self._add_hook("backward", hook, prepend)[0]


def call_with_hooks(module, args, kwargs):
    """`module(*args, **kwargs)` with its hooks, in PyTorch's order."""
    hooks = module._hooks
    for hook_id, hook in tuple(hooks.forward_pre.items()):
        if hook_id in hooks.with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                       f"but got {result}.")
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    backward = None
    if hooks.backward or hooks.backward_pre:
        backward = _BackwardHooks(module, tuple(hooks.backward.values()), tuple(hooks.backward_pre.values()))
        args = backward.wrap_inputs(args)
    called, output = set(), None
    try:
        output = module.forward(*args, **kwargs)
        for hook_id, hook in tuple(hooks.forward.items()):
            called.add(hook_id)
            if hook_id in hooks.with_kwargs:
                result = hook(module, args, kwargs, output)
            else:
                result = hook(module, args, output)
            if result is not None:
                output = result
    except Exception:
        _run_always_called(module, hooks, called, args, kwargs, output)
        raise
    if backward is not None:
        output = backward.wrap_outputs(output)
    return output


def _run_always_called(module, hooks, called, args, kwargs, output):
    """The always_call forward hooks not yet run, after forward raised (their own errors are warnings)."""
    for hook_id, hook in tuple(hooks.forward.items()):
        if hook_id not in hooks.always_call or hook_id in called:
            continue
        try:
            if hook_id in hooks.with_kwargs:
                hook(module, args, kwargs, output)
            else:
                hook(module, args, output)
        except Exception as e:  # noqa: BLE001  (the forward's error is the one raised)
            warnings.warn(f"module forward hook with ``always_call=True`` raised an exception that was silenced "
                          f"as another error was raised in forward: {e}", stacklevel=3)


class _HookPoint(Function):
    """Identity on Tensors whose backward passes their gradients through `on_grads(grads) -> grads`."""

    @staticmethod
    def forward(ctx, on_grads, materialize, *tensors):
        ctx.on_grads = on_grads
        ctx.set_materialize_grads(materialize)
        ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return (None, None) + tuple(ctx.on_grads(grads))


class _BackwardHooks:
    """One call's backward hooks: the outputs' gradients, kept until the inputs' arrive."""

    def __init__(self, module, hooks, pre_hooks):
        self.module, self.hooks, self.pre_hooks = module, hooks, pre_hooks
        self.grad_outputs = None
        self.inputs = self.outputs = None   # positions of the wrapped Tensors (None: nothing wrapped)
        self.n_inputs = self.n_outputs = 0

    def wrap_inputs(self, args):
        self.n_inputs = len(args)
        # grad_input of an input that needs no gradient is zeros, as PyTorch's (materialized)
        args, self.inputs = _wrap(args, self._on_input_grads, True)
        return args

    def wrap_outputs(self, output):
        single = not isinstance(output, tuple)
        if single and not isinstance(output, Tensor):
            warnings.warn(f"For backward hooks to be called, module output should be a Tensor or a tuple of "
                          f"Tensors but received {type(output)}", stacklevel=3)
            return output
        values = (output,) if single else output
        self.n_outputs = len(values)
        values, self.outputs = _wrap(values, self._on_output_grads, False)
        return values[0] if single else values

    def _on_output_grads(self, grads):
        self.grad_outputs = _pack(self.outputs, grads, self.n_outputs)
        for hook in self.pre_hooks:
            result = hook(self.module, self.grad_outputs)
            if result is None:
                continue
            if len(result) != len(self.grad_outputs):
                raise RuntimeError(f"Backward pre hook returned an invalid number of grad_output, got "
                                   f"{len(result)}, but expected {len(self.grad_outputs)}")
            self.grad_outputs = tuple(result)
        grad_outputs = self.grad_outputs
        if self.inputs is None:   # no input needs a gradient: the hooks run now, with grad_input all None
            warnings.warn("Full backward hook is firing when gradients are computed with respect to module "
                          "outputs since no inputs require gradients.", stacklevel=2)
            grad_inputs = (None,) * self.n_inputs
            for hook in self.hooks:
                result = hook(self.module, grad_inputs, grad_outputs)
                if result is not None and not (isinstance(result, tuple) and all(g is None for g in result)):
                    raise RuntimeError("Backward hook for Modules where no input requires gradient should always "
                                       "return None or None for all gradients.")
            self.grad_outputs = None
        return tuple(grad_outputs[i] for i in self.outputs)

    def _on_input_grads(self, grads):
        if self.grad_outputs is None:   # reached without passing through the outputs (double backward)
            return grads
        grad_inputs = _pack(self.inputs, grads, self.n_inputs)
        for hook in self.hooks:
            result = hook(self.module, grad_inputs, self.grad_outputs)
            if result is None:
                continue
            if len(result) != len(grad_inputs):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(result)}, "
                                   f"but expected {len(grad_inputs)}")
            grad_inputs = tuple(result)
        self.grad_outputs = None
        return tuple(grad_inputs[i] for i in self.inputs)


def _wrap(values, on_grads, materialize):
    """`values` with their Tensors passed through one _HookPoint, and the Tensors' positions; as they
    are (and None) when no Tensor records a gradient."""
    positions = [i for i, v in enumerate(values) if isinstance(v, Tensor)]
    if not is_grad_enabled() or not any(values[i].requires_grad for i in positions):
        return values, None
    wrapped = _HookPoint.apply(on_grads, materialize, *[values[i] for i in positions])
    out = list(values)
    for i, t in zip(positions, wrapped):
        out[i] = t
    return tuple(out), positions


def _pack(positions, grads, size):
    """A tuple of `size` with grads at `positions`, None elsewhere."""
    packed = [None] * size
    for i, g in zip(positions, grads):
        packed[i] = g
    return tuple(packed)
