"""`Parameter`: a leaf Tensor that a Module registers as learnable."""

from .. import tensor_kinds
from ..autograd import Tensor


class Parameter(Tensor):
    """A Tensor that is a module parameter: `requires_grad=True` by default, listed by `parameters()`."""

    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        from ..autograd.factory import zeros
        if data is None:
            data = zeros(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: data must be a Tensor, got {type(data).__name__}")
        base = data
        p = Tensor.__new__(cls)
        for slot in ("_g", "shape", "dtype", "device", "_block", "_step", "_version"):
            setattr(p, slot, getattr(base, slot))
        p.grad = None
        p.grad_fn = None
        p._output_nr = 0
        p.requires_grad = False
        if base._step is not None:
            import weakref
            base._step.pending.append(weakref.ref(p))
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


tensor_kinds.register("parameter", Parameter, lambda t, requires_grad: Parameter(t, requires_grad=requires_grad))
