"""`ggrad.autograd.graph`: PyTorch's saved-tensors hooks.

Inside `saved_tensors_hooks(pack_hook, unpack_hook)`, every tensor an op records for backward
(`ctx.save_for_backward`, or what a primitive saves) is handed to `pack_hook` when the op is recorded
(not under no_grad, nor when no input requires grad), and only the packed object is kept; each read of
`ctx.saved_tensors` calls `unpack_hook(packed)`, which must give a Tensor back. The innermost pair
applies, and the pair in effect when an op was recorded is the one its backward unpacks with.
`save_on_cpu()` packs to the CPU device; `disable_saved_tensors_hooks(message)` makes entering (or
being inside) a hooks context raise RuntimeError(message). The switches live in contextvars.
"""

import contextlib
import contextvars

_HOOKS = contextvars.ContextVar("ggrad_saved_tensors_hooks", default=())   # stack of (pack, unpack)
_DISABLED = contextvars.ContextVar("ggrad_saved_tensors_hooks_disabled", default=None)   # error message


def current_hooks():
    """The innermost (pack_hook, unpack_hook) in effect, or None."""
    stack = _HOOKS.get()
    return stack[-1] if stack else None


class saved_tensors_hooks:
    """Context manager: pack what ops save for backward with `pack_hook`, read it back with `unpack_hook`.

    Args:
        pack_hook (callable): Tensor -> any object, called once per saved tensor as the op is recorded.
        unpack_hook (callable): that object -> Tensor, called at every read of the saved tensor.
    """

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook
        self._tokens = []

    def __enter__(self):
        message = _DISABLED.get()
        if message is not None:
            raise RuntimeError(message)
        self._tokens.append(_HOOKS.set(_HOOKS.get() + ((self.pack_hook, self.unpack_hook),)))
        return self

    def __exit__(self, *exc):
        _HOOKS.reset(self._tokens.pop())
        return False


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors kept on the CPU device during the forward and moved back to their device when
    backward reads them (PyTorch's save_on_cpu; `pin_memory` and `device_type` are accepted, and GGML
    has no pinned host memory to ask for)."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack_to_cpu(tensor):
            return tensor.device, tensor.to("cpu")

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device)

        super().__init__(pack_to_cpu, unpack_from_cpu)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message):
    """Inside it, saved-tensors hooks are refused: entering `saved_tensors_hooks` raises
    RuntimeError(error_message), and so does entering it while hooks are in effect."""
    if current_hooks() is not None:
        raise RuntimeError(error_message)
    token = _DISABLED.set(error_message)
    try:
        yield
    finally:
        _DISABLED.reset(token)
