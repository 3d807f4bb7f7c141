"""`Parameter`: a leaf Tensor that a Module registers as learnable (ggrad.nn.Parameter).

It lives in autograd, below nn, so that checkpoints (serialization) can make Parameters without nn."""

from . import device_locks
from .factory import tensor, zeros
from .tensor import Tensor


class Parameter(Tensor):
    """A Tensor that is a module parameter: `requires_grad=True` by default, listed by `parameters()`."""

    __slots__ = ()
    _pinned = True   # the same tensor every step: a cached graph reads it as itself (trace_cache.py)

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = zeros(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: data must be a Tensor, got {type(data).__name__}")
        with device_locks.lock_of(data.device):   # data's node and graph must not change under a compute of another thread
            p = cls._make(data._node, data.shape, data.dtype, data.device, data._pending, data._block)
        p._version = data._version
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data=None, requires_grad=True):
        pass

    def __reduce__(self):
        """Pickling and copy.deepcopy give a Parameter again (PyTorch's do), with its values and requires_grad."""
        return (_rebuilt, (self.detach().numpy(), self.dtype.name, self.requires_grad))

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


def _rebuilt(values, dtype, requires_grad):
    return Parameter(tensor(values, dtype), requires_grad)
