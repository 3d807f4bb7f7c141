"""Tensor gradient hooks, as PyTorch's: `register_hook`, `register_post_accumulate_grad_hook`, and the
handle that removes them.

A non-leaf's hooks live on its grad_fn Node (per output index), where PyTorch keeps them: they run once
per backward, on the node's summed gradient, even after the Tensor object was dropped. A leaf's hooks
live in a table keyed by the tensor's id and leave with the tensor. The engine looks at the table only
when it is not empty, so a backward without leaf hooks pays nothing for them.
"""

import itertools
import weakref

_ids = itertools.count()
leaf_table = {}   # id(leaf) -> _LeafHooks


class RemovableHandle:
    """What every `register_*hook` returns: `remove()` unregisters the hook (twice is harmless); also
    a context manager that removes it on exit."""

    def __init__(self, hooks, on_empty=None):
        self.id = next(_ids)
        self._hooks, self._on_empty = hooks, on_empty

    def remove(self):
        hooks, self._hooks = self._hooks, None
        if hooks is not None and hooks.pop(self.id, None) is not None and not hooks and self._on_empty:
            self._on_empty()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class _LeafHooks:
    """The hooks of one leaf: `pre` run on its summed gradient before accumulation, `post` after."""

    def __init__(self, leaf):
        key = id(leaf)
        self.ref = weakref.ref(leaf, lambda _: leaf_table.pop(key, None))
        self.pre, self.post = {}, {}

    def drop_if_empty(self):
        if not self.pre and not self.post:
            leaf = self.ref()
            if leaf is not None and leaf_table.get(id(leaf)) is self:
                del leaf_table[id(leaf)]


def leaf_hooks(leaf):
    """The hooks of `leaf`, or None (the table's id may belong to a dead tensor's successor: checked)."""
    entry = leaf_table.get(id(leaf))
    if entry is not None and entry.ref() is leaf:
        return entry
    return None


def _leaf_entry(leaf):
    entry = leaf_hooks(leaf)
    if entry is None:
        entry = leaf_table[id(leaf)] = _LeafHooks(leaf)
    return entry


def register_hook(tensor, hook):
    """`Tensor.register_hook(hook)`: `hook(grad)` runs each time a gradient for `tensor` is computed;
    a Tensor it returns replaces the gradient (for `.grad`, and for the rest of the backward pass)."""
    if not tensor.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    node = tensor.grad_fn
    if node is None:
        entry = _leaf_entry(tensor)
        handle = RemovableHandle(entry.pre, entry.drop_if_empty)
        entry.pre[handle.id] = hook
        return handle
    if node.hooks is None:
        node.hooks = {}
    hooks = node.hooks.setdefault(tensor._output_nr, {})
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def register_post_accumulate_grad_hook(tensor, hook):
    """`hook(tensor)` runs after the gradient of leaf `tensor` was accumulated into `tensor.grad`."""
    if tensor.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    if not tensor.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    entry = _leaf_entry(tensor)
    handle = RemovableHandle(entry.post, entry.drop_if_empty)
    entry.post[handle.id] = hook
    return handle


def run_hooks(hooks, grad):
    """Call `hooks` (a dict, in registration order) on `grad`; each may return a replacement."""
    for hook in tuple(hooks.values()):
        new = hook(grad)
        if new is None:
            continue
        if new.shape != grad.shape:
            raise RuntimeError(f"hook '{_name(hook)}' has changed the size of value: gradient of shape "
                               f"{grad.shape}, hook returned {new.shape}")
        if new.dtype is not grad.dtype:
            raise RuntimeError(f"hook '{_name(hook)}' has changed the type of value: gradient of dtype "
                               f"{grad.dtype.name}, hook returned {new.dtype.name}")
        grad = new
    return grad


def run_node_hooks(node, grads):
    """The gradients of `node`'s outputs after the hooks registered on those outputs."""
    grads = list(grads)
    for nr, hooks in node.hooks.items():
        if hooks and grads[nr] is not None:
            grads[nr] = run_hooks(hooks, grads[nr])
    return grads


def _name(hook):
    return getattr(hook, "__name__", type(hook).__name__)
