"""`ggrad.autograd.functional`: vjp, jvp, jacobian, hessian, vhp and hvp of a function of Tensors,
as PyTorch's (reverse mode only; `jvp` by the double-backward trick).

`inputs` is a Tensor or a tuple of them, and so are the function's outputs; results follow the same
shape (a Tensor for a Tensor, a tuple for a tuple). The function runs on fresh leaves (or, with
`create_graph=True`, on the inputs' values with their history kept), so the caller's `.grad` is not
touched. `strict=True` raises where an output does not depend on an input instead of giving zeros.
"""

import numpy as np

from . import grad_mode
from .tensor import Tensor
from .factory import ones_like, tensor as _from_numpy, zeros_like
from .grad_api import grad as _grad
from .ops import stack


def _as_tuple(value, what, fn):
    is_tuple = isinstance(value, tuple)
    values = value if is_tuple else (value,)
    for i, v in enumerate(values):
        if not isinstance(v, Tensor):
            raise TypeError(f"The {what} given to {fn} must be either a Tensor or a tuple of Tensors but the "
                            f"value at index {i} has type {type(v).__name__}.")
    return is_tuple, values


def _prepared(inputs, create_graph):
    """Leaves the function runs on: the inputs' values, with history when create_graph keeps it."""
    return tuple(t * 1.0 if create_graph and t.requires_grad else t.detach().requires_grad_(t.dtype.is_float)
                 for t in inputs)


def _result(values, is_tuple, create_graph):
    values = tuple(v if v is None or create_graph else v.detach() for v in values)
    return values if is_tuple else values[0]


def _vjp_grads(outputs, inputs, v, create_graph, strict, fn,
               unreached="the output of the user-provided function is independent of input {}"):
    """d(outputs . v) / d inputs, zeros (or an error when strict) where an output does not reach."""
    live = [(o, g) for o, g in zip(outputs, v) if o.requires_grad]
    grads = (None,) * len(inputs)
    if live:
        grads = _grad([o for o, _ in live], inputs, [g for _, g in live], retain_graph=True,
                      create_graph=create_graph, allow_unused=True)
    out = []
    for i, (g, t) in enumerate(zip(grads, inputs)):
        if g is None:
            if strict:
                raise RuntimeError(f"{fn}: {unreached.format(i)}. This is not allowed in strict mode.")
            g = zeros_like(t)
        out.append(g)
    return tuple(out)


def _checked_v(v, like, is_tuple, fn):
    _, v = _as_tuple(v, "v", fn)
    if len(v) != len(like):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(like)} but got {len(v)}." if is_tuple
                           else "The given v should contain a single Tensor.")
    for i, (a, b) in enumerate(zip(v, like)):
        if a.shape != b.shape:
            where = f"Entry {i} in " if is_tuple else ""
            raise RuntimeError(f"{where}v has invalid size: should be {b.shape} but got {a.shape}.")
    return tuple(a.detach() for a in v)


def _run(func, inputs, create_graph, fn):
    is_in_tuple, inputs = _as_tuple(inputs, "inputs", fn)
    with grad_mode.enable_grad():
        leaves = _prepared(inputs, create_graph)
        is_out_tuple, outputs = _as_tuple(func(*leaves), "outputs of the user-provided function", fn)
    return is_in_tuple, leaves, is_out_tuple, outputs


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product at `inputs`; v may be None for a
    one-element output."""
    is_in_tuple, leaves, is_out_tuple, outputs = _run(func, inputs, create_graph, "vjp")
    if v is None:
        if len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function returns a single "
                               "Tensor with a single element.")
        v = (ones_like(outputs[0]),)
    else:
        v = _checked_v(v, outputs, is_out_tuple, "vjp")
    with grad_mode.set_grad_enabled(create_graph):
        grads = _vjp_grads(outputs, leaves, v, create_graph, strict, "vjp")
    return _result(outputs, is_out_tuple, create_graph), _result(grads, is_in_tuple, create_graph)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product, as the vjp (in u) of the vjp u^T J; v may be
    None for a one-element input."""
    is_in_tuple, leaves, is_out_tuple, outputs = _run(func, inputs, create_graph, "jvp")
    if v is None:
        if len(leaves) != 1 or leaves[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                               "single Tensor with a single element.")
        v = (ones_like(leaves[0]),)
    else:
        v = _checked_v(v, leaves, is_in_tuple, "jvp")
    with grad_mode.enable_grad():
        dummies = tuple(zeros_like(o).requires_grad_() for o in outputs)
        u_j = _vjp_grads(outputs, leaves, dummies, True, strict, "jvp")   # linear in the dummies
        with grad_mode.set_grad_enabled(create_graph):
            result = _vjp_grads(u_j, dummies, v, create_graph, strict, "jvp",
                                "output {} of the user-provided function is independent of the input")
    return _result(outputs, is_out_tuple, create_graph), _result(result, is_out_tuple, create_graph)


def jacobian(func, inputs, create_graph=False, strict=False):
    """d func(inputs) / d inputs: for one input and one output a Tensor of shape
    output.shape + input.shape; a tuple per input and/or per output otherwise. One backward per
    output element (reverse mode)."""
    is_in_tuple, leaves, is_out_tuple, outputs = _run(func, inputs, create_graph, "jacobian")
    with grad_mode.set_grad_enabled(create_graph):
        per_output = []
        for o in outputs:
            n = o.numel()
            rows = []
            for j in range(n):
                basis = np.zeros(n, dtype=np.float32)
                basis[j] = 1.0
                rows.append(_vjp_grads((o,), leaves, (_from_numpy(basis.reshape(o.shape), device=o.device),),
                                       create_graph, strict, "jacobian"))
            blocks = []
            for i, t in enumerate(leaves):
                if rows:
                    blocks.append(stack([row[i] for row in rows]).reshape(o.shape + t.shape))
                else:
                    blocks.append(_from_numpy(np.zeros(o.shape + t.shape, np.float32), device=t.device))
            per_output.append(_result(blocks, is_in_tuple, create_graph))
    return tuple(per_output) if is_out_tuple else per_output[0]


def _scalar_function(func, fn):
    def single(*args):
        out = func(*args)
        if not isinstance(out, Tensor):
            raise RuntimeError(f"The function given to {fn} should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError(f"The Tensor returned by the function given to {fn} should contain a single element")
        return out.reshape(())
    return single


def hessian(func, inputs, create_graph=False, strict=False):
    """The matrix of second derivatives of a one-element `func` at `inputs` (shape input.shape * 2;
    a tuple of tuples for a tuple of inputs)."""
    single = _scalar_function(func, "hessian")
    is_in_tuple = isinstance(inputs, tuple)

    def gradient(*args):
        out = single(*args)
        return _vjp_grads((out,), args, (ones_like(out),), True, strict, "hessian")

    jac = jacobian(lambda *args: gradient(*args), inputs if is_in_tuple else (inputs,), create_graph, strict)
    return jac if is_in_tuple else jac[0][0]


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H) for a one-element `func`: the gradient of (grad func . v)."""
    single = _scalar_function(func, "vhp")
    is_in_tuple, leaves, _, outputs = _run(single, inputs, create_graph, "vhp")
    v = _checked_v(v, leaves, is_in_tuple, "vhp") if v is not None else None
    if v is None:
        if len(leaves) != 1 or leaves[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                               "single Tensor with a single element.")
        v = (ones_like(leaves[0]),)
    with grad_mode.enable_grad():
        g = _vjp_grads(outputs, leaves, (ones_like(outputs[0]),), True, strict, "vhp")
        with grad_mode.set_grad_enabled(create_graph):
            result = _vjp_grads(g, leaves, v, create_graph, strict, "vhp")
    return _result(outputs, False, create_graph), _result(result, is_in_tuple, create_graph)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): the Hessian of a twice-differentiable function is symmetric, so H v is
    v^T H (vhp)."""
    return vhp(func, inputs, v, create_graph, strict)
