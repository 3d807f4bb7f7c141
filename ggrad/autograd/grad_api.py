"""`ggrad.autograd.grad` and `ggrad.autograd.backward`, as PyTorch's.

`grad` returns the gradients of `outputs` with respect to `inputs` and touches no `.grad`;
`backward` accumulates into `.grad` (of every leaf, or of `inputs` only). With `create_graph=True`
the gradients are themselves recorded, so they can be differentiated again (gradient penalties,
Hessian-vector products). Both share the engine's one backward pass (engine.py).
"""

from collections.abc import Mapping

from . import engine, grad_mode, hooks
from .tensor import Tensor
from .factory import ones_like, zeros_like


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, materialize_grads=False):
    """The gradients of `outputs` (a Tensor or a sequence) with respect to `inputs` (a Tensor, a
    sequence, or a dict of them), weighted by `grad_outputs` (None: ones, for one-element outputs).

    Args:
        retain_graph: keep the graph for another backward (default: `create_graph`).
        create_graph: record the gradients' own graph, for higher-order derivatives.
        allow_unused: an input the outputs do not depend on gets None instead of an error
            (default: `materialize_grads`).
        materialize_grads: such an input gets zeros instead of None.
        only_inputs: ignored (deprecated in PyTorch too).

    Returns:
        A tuple with one gradient per input (a dict when `inputs` was one).
    """
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    if allow_unused is None:
        allow_unused = materialize_grads
    outputs = _as_tuple(outputs, "outputs", "grad")
    targets = _as_tuple(inputs, "inputs", "grad")
    if not targets:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    roots = _roots(outputs, grad_outputs)
    _check_inputs(targets)
    retain = create_graph if retain_graph is None else retain_graph
    result = engine.execute(roots, retain, create_graph, targets)
    for i, (g, t) in enumerate(zip(result, targets)):
        if g is not None:
            continue
        if materialize_grads:
            result[i] = zeros_like(t).requires_grad_(create_graph)
        elif not allow_unused:
            raise RuntimeError(f"The differentiated Tensor at index {i} appears to not have been used in the "
                               f"graph. Set allow_unused=True if this is the desired behavior.")
    if isinstance(inputs, dict):
        return dict(zip(inputs.keys(), result))
    return tuple(result)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate the gradients of `tensors` (weighted by `grad_tensors`) into the `.grad` of every
    leaf that requires grad, or of `inputs` only (leaves or not) when given."""
    tensors = _as_tuple(tensors, "tensors", "backward")
    roots = _roots(tensors, grad_tensors)
    retain = create_graph if retain_graph is None else retain_graph
    if inputs is None:
        engine.execute(roots, retain, create_graph)
        return
    targets = _as_tuple(inputs, "inputs", "backward")
    if not targets:
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    _check_inputs(targets)
    for t, g in zip(targets, engine.execute(roots, retain, create_graph, targets)):
        if g is None:
            continue
        engine.accumulate_leaf(t, g if create_graph else g.detach())
        entry = hooks.leaf_hooks(t) if t.grad_fn is None else None
        if entry is not None:
            for hook in tuple(entry.post.values()):
                hook(t)


def _as_tuple(value, name, fn):
    if isinstance(value, Tensor):
        return (value,)
    if type(value) is dict:
        return tuple(value.values())
    if isinstance(value, Mapping):
        raise TypeError(f"`{name}` argument to `{fn}()` must be a dict, not {type(value).__name__}. "
                        f"Other Mapping types are not supported.")
    try:
        values = tuple(value)
    except TypeError:
        raise TypeError(f"{fn}: `{name}` must be a Tensor or a sequence of Tensors, got "
                        f"{type(value).__name__}") from None
    for i, v in enumerate(values):
        if not isinstance(v, Tensor):
            raise TypeError(f"{fn}: `{name}` must hold Tensors, got {type(v).__name__} at index {i}")
    return values


def _roots(outputs, grads):
    """(output, gradient) pairs, the gradients checked or made as PyTorch's `_make_grads` does."""
    if grads is None:
        grads = (None,) * len(outputs)
    elif isinstance(grads, Tensor):
        grads = (grads,)
    else:
        try:
            grads = tuple(grads)
        except TypeError:
            raise TypeError(f"gradients can be either Tensors or None, but got {type(grads).__name__}") from None
    if len(grads) != len(outputs):
        raise RuntimeError(f"got {len(outputs)} outputs and {len(grads)} gradients: give one gradient "
                           f"(or None) per output")
    roots = []
    for i, (out, g) in enumerate(zip(outputs, grads)):
        if g is None:
            if out.requires_grad and out.numel() != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs (output {i} has "
                                   f"shape {out.shape}: pass its gradient)")
            g = ones_like(out) if out.requires_grad else None
        elif not isinstance(g, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
        elif g.shape != out.shape:
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and output[{i}] "
                               f"has a shape of {out.shape}.")
        if not out.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        roots.append((out, g))
    return roots


def _check_inputs(targets):
    for t in targets:
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")


def composite_vjp(formula, inputs, needs, grad_output):
    """The gradients of `formula(*inputs)` weighted by `grad_output`, for the inputs flagged in `needs`
    (None for the others), by differentiating formula, a composition of differentiable ops.

    The second derivative of a backward op that GGML computes as one node (rms_norm_back,
    cross_entropy_loss_back): its rule restates the op as such a formula. Under create_graph the result
    keeps its history back to the inputs, so a third derivative is right too."""
    outer = grad_mode.is_grad_enabled()
    with grad_mode.enable_grad():
        leaves = [t if outer and t.requires_grad else t.detach().requires_grad_(need) for t, need in zip(inputs, needs)]
        wanted = [t for t, need in zip(leaves, needs) if need]
        if not wanted:
            return (None,) * len(needs)
        grads = iter(grad(formula(*leaves), wanted, grad_output, create_graph=outer, allow_unused=True))
    return tuple(next(grads) if need else None for need in needs)
