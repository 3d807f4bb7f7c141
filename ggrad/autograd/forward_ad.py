"""`ggrad.autograd.forward_ad`: PyTorch's forward-mode AD API (dual_level, make_dual, unpack_dual).

    with forward_ad.dual_level():
        x = forward_ad.make_dual(primal, tangent)
        y = f(x)
        jvp = forward_ad.unpack_dual(y).tangent      # J_f(primal) @ tangent

ggrad has no per-op forward rules: a tangent is computed from reverse mode by the double-backward
trick. `make_dual` gives a tensor that records the ops applied to it; `unpack_dual(y)` takes the
vector-Jacobian product u -> J^T u of y with respect to every live dual tensor of the level (linear
in a dummy u), dots it with their tangents and differentiates that in u: d/du (J^T u . t) = J t.
Every op on the way needs a differentiable backward (as for double backward).

Deliberate differences from PyTorch, all from that construction:
- a dual tensor and what is computed from it report `requires_grad=True` (PyTorch: only where the
  primal requires grad), and in-place ops on a dual whose primal is a plain tensor are refused as on
  any leaf that requires grad;
- ops run under no_grad record nothing, so their results carry no tangent (PyTorch still
  propagates tangents under no_grad);
- `unpack_dual(y).primal` is y itself (PyTorch: a view of y without the tangent).
One level at a time, as PyTorch ("Nested forward mode AD is not supported at the moment").
"""

import contextvars
import weakref
from collections import namedtuple

from . import grad_mode
from .factory import zeros_like
from .grad_api import grad
from .recording import alias

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])

_LEVEL = contextvars.ContextVar("ggrad_dual_level", default=None)


class _Level:
    """One dual level: its index and its dual tensors (weakly held) with their tangents."""

    def __init__(self, index):
        self.index = index
        self.duals = []   # (weakref to the dual tensor, tangent)

    def tangent_of(self, t):
        for ref, tangent in self.duals:
            if ref() is t:
                return tangent
        return None

    def live(self):
        return [(d, tangent) for d, tangent in ((ref(), tangent) for ref, tangent in self.duals) if d is not None]


def enter_dual_level():
    """Open a dual level and return its index (0: one level at a time)."""
    if _LEVEL.get() is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _LEVEL.set(_Level(0))
    return 0


def exit_dual_level(*, level=None):
    """Close the current level: its dual tensors lose their tangents."""
    current = _LEVEL.get()
    if current is None or (level is not None and level != current.index):
        raise RuntimeError(f"Trying to exit a forward AD level that was not the last one that was created "
                           f"(level {level}); only the current level can be exited.")
    _LEVEL.set(None)


class dual_level:
    """Context manager of a forward AD level: dual tensors made inside it have tangents until it exits."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()
        return False


def _current(level, what):
    current = _LEVEL.get()
    if current is None:
        if what == "make":
            raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, make sure to "
                               "enter_dual_level() first.")
        return None
    if level is not None and level != current.index:
        raise RuntimeError(f"forward AD level {level} does not exist (the current level is {current.index})")
    return current


def make_dual(tensor, tangent, *, level=None):
    """A tensor with the values of `tensor` whose tangent is `tangent` (same shape, floating point)."""
    current = _current(level, "make")
    if not tensor.dtype.is_float:
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype!r}")
    if not tangent.dtype.is_float:
        raise ValueError(f"Expected tangent to be floating point or complex, but got: {tangent.dtype!r}")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError(f"Trying to set a forward gradient that has a different size than that of the original "
                           f"Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while the given "
                           f"forward gradient is of size {list(tangent.shape)}.")
    if current.tangent_of(tensor) is not None:
        raise RuntimeError(f"Making a dual Tensor based on a Tensor that already has a forward gradient at the same "
                           f"level {current.index} is not supported.")
    if tensor.requires_grad:   # differentiable in reverse mode too, as PyTorch's view
        dual = tensor.view_as(tensor)
    else:
        dual = alias(tensor)
        dual.requires_grad = True
    current.duals.append((weakref.ref(dual), tangent))
    return dual


def unpack_dual(tensor, *, level=None):
    """(primal, tangent) of `tensor`: tangent None where it depends on no dual tensor of the level."""
    current = _current(level, "unpack")
    if current is None:
        return UnpackedDualTensor(tensor, None)
    own = current.tangent_of(tensor)
    if own is not None:
        return UnpackedDualTensor(tensor, own)
    return UnpackedDualTensor(tensor, _tangent(tensor, current.live()))


def _tangent(y, duals):
    """J v of y with respect to the dual tensors, by differentiating the vjp in its cotangent."""
    if y.grad_fn is None or not duals:
        return None
    inputs = [d for d, _ in duals]
    with grad_mode.enable_grad():
        u = zeros_like(y).requires_grad_()
        vjps = grad(y, inputs, u, retain_graph=True, create_graph=True, allow_unused=True)
        total = None
        for g, (_, v) in zip(vjps, duals):
            if g is not None:
                term = (g * v).sum()
                total = term if total is None else total + term
        if total is None:
            return None
        jv, = grad(total, u, retain_graph=True, allow_unused=True)
    return zeros_like(y) if jv is None else jv.detach()
