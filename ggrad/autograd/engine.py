"""The backward pass: walk the recorded graph in reverse topological order, emitting gradient nodes."""

from . import autocast_hook, grad_mode
from . import tensor as _tensor  # a module reference: tensor.py imports this module
from .factory import ones_like, zeros
from .function import FREED_GRAPH


def _topological(root):
    """Nodes reachable from `root`, each after every node that feeds it a gradient (explicit stack)."""
    order, seen = [], {id(root)}
    stack = [(root, iter(root.next_edges))]
    while stack:
        node, edges = stack[-1]
        for edge in edges:
            if isinstance(edge, tuple) and id(edge[0]) not in seen:
                seen.add(id(edge[0]))
                stack.append((edge[0], iter(edge[0].next_edges)))
                break
        else:
            stack.pop()
            order.append(node)
    order.reverse()
    return order


def accumulate_leaf(leaf, grad):
    """Add `grad` into `leaf.grad` (gradients accumulate across backward calls, as in PyTorch)."""
    if grad.shape != leaf.shape:
        raise RuntimeError(f"gradient of shape {grad.shape} for a tensor of shape {leaf.shape}")
    if grad.dtype != leaf.dtype:
        grad = grad.to(leaf.dtype)
    leaf.grad = grad if leaf.grad is None else leaf.grad + grad


def backward(tensor, gradient=None, retain_graph=False, create_graph=False):
    """Compute d tensor / d leaves and accumulate into each leaf's `.grad`."""
    if not tensor.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if gradient is None:
        if tensor.numel() != 1:
            raise RuntimeError(f"grad can be implicitly created only for scalar outputs; got shape "
                               f"{tensor.shape}: pass gradient= to backward()")
        gradient = ones_like(tensor)
    elif not isinstance(gradient, _tensor.Tensor):
        raise TypeError(f"backward: gradient must be a Tensor, got {type(gradient).__name__}")
    elif gradient.shape != tensor.shape:
        raise RuntimeError(f"backward: gradient shape {gradient.shape} does not match tensor shape {tensor.shape}")
    if tensor.grad_fn is None:
        accumulate_leaf(tensor, gradient.detach())
        return
    with grad_mode.set_grad_enabled(create_graph), autocast_hook.suspended():   # rules run as written
        _run(tensor.grad_fn, tensor._output_nr, gradient, retain_graph)


def _run(root, root_nr, gradient, retain_graph):
    pending = {id(root): [None] * root.n_outputs}
    pending[id(root)][root_nr] = gradient
    for node in _topological(root):
        if node.freed:
            raise RuntimeError(FREED_GRAPH)
        grads = pending.pop(id(node), None)
        if grads is None:
            continue
        grads = [_as_output_dtype(g, out) for g, out in zip(grads, node.outputs)]
        _retain(node, grads)
        if node.n_outputs > 1 and any(g is None for g in grads):
            grads = [g if g is not None else zeros(shape, dtype=dtype, device=device)
                     for g, (shape, dtype, device) in zip(grads, node.outputs)]
        result = node.fn.gradients(node.ctx, grads)
        if not isinstance(result, tuple):
            result = (result,)
        if len(result) < len(node.next_edges):
            raise RuntimeError(f"{node.name}.backward returned {len(result)} gradients for "
                               f"{len(node.next_edges)} inputs")
        for edge, grad in zip(node.next_edges, result):
            if edge is None or grad is None:
                continue
            if isinstance(edge, tuple):
                target, nr = edge
                slot = pending.setdefault(id(target), [None] * target.n_outputs)
                slot[nr] = grad if slot[nr] is None else slot[nr] + grad
            else:
                accumulate_leaf(edge, grad.detach() if not grad_mode.is_grad_enabled() else grad)
        if not retain_graph:
            node.ctx._free()


def _as_output_dtype(grad, output):
    """A gradient in its tensor's dtype (as PyTorch's): a float32 product's gradient of a float16 tensor
    is cast to float16, so that every rule sees gradients of its outputs' dtypes."""
    dtype = output[1]
    return grad if grad is None or grad.dtype is dtype or not dtype.is_float else grad.to(dtype)


def _retain(node, grads):
    if node.retained:
        for nr, ref in node.retained.items():
            t = ref()
            if t is not None and grads[nr] is not None:
                t.grad = grads[nr] if t.grad is None else t.grad + grads[nr]
