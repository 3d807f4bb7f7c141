"""`Tensor`: the define-by-run Variable. Eager semantics; values computed by GGML when read.

Operators and methods forward to the functions in `ggrad.autograd.ops`; this module holds the
Tensor's state, conversions and reads.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterator, overload

import numpy as np

from .. import ggml
from . import device_locks, execution, hooks, memory, printing, view_tracking
from .torch_dtypes import from_storage

if TYPE_CHECKING:   # the methods methods.py installs, declared for type checkers (tensor_methods.pyi)
    from .tensor_methods import TensorMethods as _Methods
else:
    _Methods = object


class Tensor(_Methods):
    """An n-dimensional array on a GGML device (beyond 4-D folded: folding.py), optionally recording gradients.

    Attributes:
        shape: numpy-order shape (tuple).
        dtype: a `ggrad.ggml.DType` (`ggrad.float32`, `ggrad.float16`, `ggrad.int32`, ...).
        device: the `ggrad.Device` holding it.
        requires_grad: whether operations on it are recorded for backward.
        grad: the accumulated gradient (a Tensor) after `backward()`, else None.
        grad_fn: the node that produced it (None for leaves).
    """

    __slots__ = ("_node", "shape", "dtype", "device", "_block", "_pending", "requires_grad", "grad", "grad_fn",
                 "_output_nr", "_version", "_view_of", "_views", "__weakref__")

    shape: tuple[int, ...]
    dtype: ggml.DType
    device: ggml.Device
    requires_grad: bool
    grad: Tensor | None
    grad_fn: Any   # the Node (ggrad.autograd.Node) that produced it, or None

    # a Tensor that is the same from step to step (a Parameter) enters a cached graph as itself (trace_cache.py)
    _pinned = False

    __array_priority__ = 1000  # numpy scalars on the left defer to Tensor's reflected operators

    # ---- the one constructor, the rebind and the compute's writes ----------------------------
    @classmethod
    def _make(cls, node, shape, dtype, device, pending=None, block=None):
        """A Tensor (or subclass) over GGML node `node`, numpy-order `shape`, with no history.

        `pending` is the PendingGraph that still has to compute `node` (None once computed); `block` owns
        the memory of a computed tensor. Every Tensor of ggrad is made here.
        """
        t = object.__new__(cls)
        t._node, t._block, t._pending = node, block, pending
        t.shape, t.dtype, t.device = tuple(shape), dtype, device
        t.requires_grad = False
        t.grad = t.grad_fn = None
        t._output_nr = t._version = 0
        t._view_of = t._views = None   # view bookkeeping (view_tracking.py): what t views, what views t
        if pending is not None:
            pending.track(t)
        return t

    def _rebind(self, src, write=True):
        """Point this Tensor at the value of `src` (its node, memory, shape, dtype, device), keeping the
        object: in-place ops, Parameters and `Module.to` go through here. Bumps the version counter unless
        nothing was written (`write=False`: the same values over new nodes)."""
        with device_locks.lock_of(src.device):   # src's node and graph must not change under a compute of another thread
            self._node, self._block, self._pending = src._node, src._block, src._pending
            self.shape, self.dtype, self.device = src.shape, src.dtype, src.device
            if src._pending is not None:
                src._pending.track(self)
        if write:
            self._version += 1
        return self

    def _held_as(self, node):
        """While its graph is pending: compute this tensor's value as `node` (a contiguous copy of a held view,
        a copy of a result off the CPU fallback; a rolled-back compute puts the first node back)."""
        self._node = node

    def _computed(self, node, block):
        """After its graph's compute: the value is `node`, in `block`'s memory; nothing is pending."""
        self._node, self._block, self._pending = node, block, None

    def _failed(self, graph):
        """Its graph's compute failed a check: reading the value raises that graph's error (FailedGraph)."""
        self._pending = graph

    # ---- state -------------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def ndimension(self) -> int:
        return len(self.shape)

    def nelement(self) -> int:
        return self.numel()

    def get_device(self) -> int:
        """The device index, -1 for the CPU (PyTorch's convention)."""
        return -1 if self.device.type == "cpu" else self.device.index

    def is_signed(self) -> bool:
        return self.dtype.name not in ("bool", "u8")

    def is_complex(self) -> bool:
        return False   # ggrad has no complex dtypes

    @property
    def retains_grad(self) -> bool:
        """Whether `retain_grad()` was called on this non-leaf tensor."""
        retained = self.grad_fn.retained if self.grad_fn is not None else None
        return bool(retained) and retained.get(self._output_nr) is not None and \
            retained[self._output_nr]() is self

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @overload
    def size(self, dim: None = None) -> tuple[int, ...]: ...

    @overload
    def size(self, dim: int) -> int: ...

    def size(self, dim: int | None = None) -> tuple[int, ...] | int:
        if dim is None:
            return self.shape
        return self.shape[_axis(dim, self.ndim)]

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def is_pending(self) -> bool:
        """True until GGML has computed this tensor."""
        return self._pending is not None

    @property
    def data(self) -> Tensor:
        """The same values and storage, detached from the graph (a write into it changes this tensor)."""
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        """`p.data = t`: this tensor takes t's values (its shape and dtype too), keeping its identity and
        requires_grad, recording no gradient (as PyTorch; views made before keep the old values)."""
        if not isinstance(value, Tensor):
            raise TypeError(f"data: expected a Tensor, got {type(value).__name__}")
        self._rebind(value.detach())

    @property
    def T(self) -> Tensor:
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> Tensor:
        """The last two dimensions swapped (a view), as PyTorch's batched-matrix transpose."""
        if self.ndim < 2:
            raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got "
                               f"{self.ndim}-D tensor.")
        return self.transpose(-2, -1)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self.device.type == "cpu"

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if not self.is_leaf and not requires_grad:
            raise RuntimeError("you can only change requires_grad flags of leaf variables")
        if requires_grad and not self.dtype.is_float:
            raise RuntimeError(f"only floating point tensors can require gradients, not {self.dtype.name}")
        self.requires_grad = bool(requires_grad)
        return self

    def retain_grad(self) -> Tensor:
        """Keep `.grad` on this non-leaf tensor after backward."""
        if self.grad_fn is None:
            return self
        if self.grad_fn.retained is None:
            self.grad_fn.retained = {}
        self.grad_fn.retained[self._output_nr] = weakref.ref(self)
        return self

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> hooks.RemovableHandle:
        """`hook(grad)` runs on this tensor's gradient in every backward; a Tensor it returns replaces
        the gradient. Returns a handle whose `remove()` unregisters it."""
        return hooks.register_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]) -> hooks.RemovableHandle:
        """`hook(self)` runs after this leaf's gradient was accumulated into `.grad`."""
        return hooks.register_post_accumulate_grad_hook(self, hook)

    # ---- reads -------------------------------------------------------------------------------
    def realize(self) -> Tensor:
        """Compute this tensor (and everything else pending on its device) now."""
        if self._pending is not None:
            execution.realize(self._pending)
        return self

    def numpy(self) -> np.ndarray:
        """A numpy copy of the values (float32 for bf16, np.int64 for int64, np.bool_ for bool)."""
        if view_tracking.blocks_across(self):
            return self.dequantize().numpy()
        self.realize()
        shape = self.shape
        with device_locks.lock_of(self.device):   # a result of the last compute moves before the next one
            out = ggml.get_data(self._node, shape if shape else (1,))
        memory.stats.bytes_read += self._node.nbytes
        memory.stats.host_reads += 1
        return from_storage(out.reshape(shape), self.dtype)

    def is_floating_point(self) -> bool:
        return self.dtype.is_float

    def item(self) -> int | float | bool:
        if self.numel() != 1:
            raise ggml.errors.ShapeError(f"a Tensor with {self.numel()} elements cannot be converted to a Python "
                                         "scalar")
        return self.numpy().reshape(()).item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.is_float:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of a Tensor with {self.numel()} elements is ambiguous")
        return bool(self.item())

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self) -> str:
        values = printing.values_text(self.numpy(), "tensor(", {"bool": lambda b: "True" if b else "False"})
        # PyTorch's repr leaves its default dtypes out
        return printing.tensor_text(self, values, self.dtype.name not in ("f32", "i64", "bool"))

    def __hash__(self) -> int:
        return id(self)


def _axis(dim, ndim):
    """Normalise a possibly negative dimension index."""
    if dim.__class__ is int and -ndim <= dim < ndim:   # the common case, checked in one comparison
        return dim + ndim if dim < 0 else dim
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"dimension must be an int, got {type(dim).__name__}")
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(ndim, 1)}, "
                         f"{max(ndim, 1) - 1}], but got {dim})")
    return dim % max(ndim, 1)
