"""Tensor's operators and methods, each forwarding to the function of the same name in `ops`.

Kept apart from tensor.py so the Tensor class holds state and reads, and this file reads as a table.
"""

from .. import ggml
from . import complex_tensor, declaration, engine, grad_api, grad_mode, legacy, ops, torch_dtypes, view_tracking
from . import inplace_views, random_fill  # noqa: F401  (they declare Tensor methods: uniform_, t_, ...)
from .boundary import typed
from .factory import tensor
from .function import Function
from .ops import advanced_index, logical, mask_index, mask_positions
from .ops.convert import convert
from .recording import alias
from .tensor import Tensor
from .torch_dtypes import BOOL, INT8, INT16, INT64, UINT8
from .arguments import kinds


def _backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate the gradient of this tensor into the `.grad` of every leaf that requires grad
    (of `inputs` only, when given); `retain_graph` defaults to `create_graph`."""
    if inputs is None:
        engine.backward(self, gradient, create_graph if retain_graph is None else retain_graph, create_graph)
    else:
        grad_api.backward(self, gradient, retain_graph, create_graph, inputs=inputs)


def _reduce(self):
    """Pickling: the values, dtype and requires_grad, made again by `tensor`."""
    return (tensor, (self.numpy(), self.dtype.name, None, self.requires_grad))


def _flip(fn):
    return lambda self, other: fn(other, self)


def _imag(self):
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


def _compare(fn):
    """`==` and friends: elementwise, a bool tensor; an object that is no number gives NotImplemented
    (so `t == None` is False, as PyTorch)."""
    def compare(self, other):
        if not isinstance(other, (Tensor, int, float, bool)) and not hasattr(other, "__float__"):
            return NotImplemented
        return fn(self, other)
    return compare


def _check_inplace(t, op):
    if t.requires_grad and t.is_leaf and grad_mode.is_grad_enabled():
        raise RuntimeError(f"{op}: a leaf Variable that requires grad is being used in an in-place operation; "
                           "wrap it in ggrad.no_grad() (as optimizers do)")


def _assign(self, value, op):
    """In-place ops rebind this Tensor to the new value (its old storage is never overwritten); a view
    writes the value into its base instead, and views of a rebound base follow (view_tracking.py)."""
    viewing = self._view_of is not None
    if viewing:
        view_tracking.check_writable(self, op)
    else:
        _check_inplace(self, op)
    if value.shape != self.shape:
        raise RuntimeError(f"{op}: output with shape {self.shape} doesn't match the broadcast shape {value.shape}")
    if viewing:
        return view_tracking.write_through(self, value)
    return view_tracking.set_value(self, value.to(self.dtype))


def _inplace(fn, name):
    def method(self, *args, **kwargs):
        value = fn(_operand(self), *args, **kwargs)
        if value.dtype.is_float and not self.dtype.is_float:
            raise RuntimeError(f"{name}: result type {value.dtype.name} can't be cast to the desired output type "
                               f"{self.dtype.name}")
        return _assign(self, value, name)
    method.__name__ = name
    method.__wrapped__ = fn   # its signature is the op's (self is the op's input), for the argument table
    return method


def _operand(t):
    """t as the input of its own in-place op: with grad on, a separate Tensor object over t's value and
    history, so that what the op saves for backward (`y.mul_(b)` keeps y's old value for b's gradient)
    is not changed when t is rebound, as PyTorch keeps it."""
    if not grad_mode.is_grad_enabled():
        return t
    shadow = alias(t)
    if t.grad_fn is not None:
        shadow.grad_fn, shadow._output_nr, shadow.requires_grad = t.grad_fn, t._output_nr, t.requires_grad
    return shadow


def to(self, *args, **kwargs):
    """Move to a device and/or convert to a dtype: `.to("cuda:0")`, `.to(ggrad.float16)`."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)    # transfers are synchronous: nothing to choose
    kwargs.pop("memory_format", None)   # one (contiguous) layout
    if kwargs:
        raise TypeError(f"to(): unexpected arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):   # .to(other): other's dtype and device
            dtype, device = a.dtype, a.device
        elif isinstance(a, (ggml.DType, complex_tensor.ComplexDType)) or ggml.dtypes.is_name(a) or \
                torch_dtypes.is_name(a):
            dtype = a
        else:
            device = a
    out = self
    if dtype is complex_tensor.COMPLEX64:   # a real tensor as complex64: imaginary part 0
        out = complex_tensor.complex(out.float(), out.float() * 0.0)
        return out.to(device) if device is not None else out
    if dtype is not None:
        out = convert(out, dtype)
    if device is not None:
        dev = ggml.device(device)
        if dev != out.device:
            out = _copy_to_device(out, dev)
    return clone(out) if copy and out is self else out


def _copy_to_device(t, dev):
    moved = tensor(t.detach().numpy(), t.dtype.name, dev)
    if t.requires_grad:
        return _DeviceCopy.apply(t, moved)
    return moved


class _DeviceCopy(Function):
    """Gradient flows back across a device move (as a host copy)."""

    @staticmethod
    def forward(ctx, src, moved):
        ctx.src_device = src.device
        return alias(moved)

    @staticmethod
    def backward(ctx, g):
        return _copy_to_device(g, ctx.src_device), None


def _flip_dims(self, *dims, **kwargs):
    """`x.flip(0, 1)`, `x.flip((0, 1))` or `x.flip(dims=...)`, as PyTorch's method."""
    if "dims" in kwargs:
        return ops.flip(self, kwargs.pop("dims"), **kwargs)
    if not dims:
        raise TypeError("flip() missing 1 required positional argument: 'dims'")
    return ops.flip(self, dims[0] if len(dims) == 1 else dims, **kwargs)


def _repeat_interleave(self, repeats, dim=None, *, output_size=None):
    """The method form needs `repeats` (only the function takes a tensor of counts alone)."""
    return ops.repeat_interleave(self, repeats, dim, output_size=output_size)


def _where(self, condition, other):
    """`x.where(condition, y)`: x where condition holds, else y (torch.where(condition, x, y))."""
    return ops.where(condition, self, other)


def clone(self):
    return self * 1.0 if self.dtype.is_float else (self.to(ggml.f32)).to(self.dtype)


def _type_method(dt):
    return lambda self: to(self, dt)


def _type(self, dtype=None):
    """`.type()` names the dtype as PyTorch does ("torch.FloatTensor"); `.type(dtype)` converts."""
    if dtype is None:
        names = {"f32": "Float", "f16": "Half", "bf16": "BFloat16", "i32": "Int", "i64": "Long", "bool": "Bool",
                 "i8": "Char", "u8": "Byte", "i16": "Short"}
        return f"ggrad.{names.get(self.dtype.name, self.dtype.name)}Tensor"
    if isinstance(dtype, str) and dtype in legacy.BY_NAME:   # .type("torch.LongTensor")
        dtype = legacy.BY_NAME[dtype]
    return to(self, dtype.dtype if isinstance(dtype, legacy.LegacyTensorType) else dtype)


def _cuda(self, device=None, non_blocking=False, memory_format=None):
    """`x.cuda()`: x on a CUDA device (`device` an index, a name or a Device; default the first)."""
    return to(self, _cuda_name(device))


def _cuda_name(device):
    return "cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device)


def _pin_memory(self, device=None):
    """x itself: GGML uploads from host memory on its own, so there is nothing to pin (PyTorch copies x into
    page-locked memory)."""
    return self


def _max(self, dim=None, keepdim=False):
    return ops.max(self, dim, keepdim)


def _min(self, dim=None, keepdim=False):
    return ops.min(self, dim, keepdim)


def _overwrite(self, value, op):
    """zero_/fill_/copy_: `value` replaces self, recording no gradient of self's old value. A leaf is
    written under no_grad (as ggrad always allowed, also for one that requires grad); a view writes into
    its base with PyTorch's checks and gradients (the base's other elements keep theirs)."""
    if self._view_of is not None or not self.is_leaf:
        return _assign(self, value, op)
    with grad_mode.no_grad():
        return _assign(self, value, op)


def _masked_fill_(self, mask, value):
    return _assign(self, ops.masked_fill(self, mask, value), "masked_fill_")


def _getitem(self, key):
    key = mask_index.bool_lists_as_masks(key)
    if mask_index.is_mask(key):
        return mask_index.getitem(self, key)
    if advanced_index.find(key):
        return advanced_index.getitem(self, key)
    return mask_positions.getitem(self, key) if mask_positions.find(key) else ops.getitem(self, key)


def _setitem(self, key, value):
    if self.requires_grad and self.is_leaf and grad_mode.is_grad_enabled():
        raise RuntimeError("__setitem__: a view of a leaf Variable that requires grad is being used in an in-place "
                           "operation; wrap it in ggrad.no_grad() (as optimizers do)")
    key = mask_index.bool_lists_as_masks(key)
    if mask_index.is_mask(key):
        new = mask_index.setitem(self, key, value)
    elif mask_positions.find(key):
        new = mask_positions.setitem(self, key, value)
    elif advanced_index.find(key, write=True):
        new = advanced_index.setitem(self, key, value)
    else:
        new = ops.setitem(self, key, value)
    _assign(self, new, "__setitem__")


def _index_put_(self, indices, values, accumulate=False):
    return _assign(self, mask_index.index_put(self, indices, values, accumulate), "index_put_")


def _zero_(self):
    return _overwrite(self, self.detach() * 0.0, "zero_")


@kinds("fill_", value=None)
def _fill_(self, value):
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} "
                           "dimensions")
    return _overwrite(self, self.detach() * 0.0 + value, "fill_")


def _copy_(self, src):
    if not isinstance(src, Tensor):
        src = tensor(src, dtype=self.dtype, device=self.device)
    value = src.to(self.dtype).to(self.device)
    if value is src and src._pinned:
        # a Parameter's memory is written in place by the fused optimizer steps: taking it over would make
        # this tensor follow the parameter's later values (PyTorch's copy_ keeps the values of now)
        value = clone(src)
    if value.shape != self.shape:
        value = ops.expand(value, self.shape)
    return _overwrite(self, value, "copy_")


_METHODS = {
    "__add__": ops.add, "__radd__": _flip(ops.add), "__sub__": ops.sub, "__rsub__": _flip(ops.sub),
    "__mul__": ops.mul, "__rmul__": _flip(ops.mul), "__truediv__": ops.div, "__rtruediv__": _flip(ops.div),
    "__matmul__": ops.matmul, "__rmatmul__": _flip(ops.matmul),
    "__pow__": ops.pow, "__rpow__": _flip(ops.pow), "__neg__": ops.neg, "__abs__": ops.abs,
    "__getitem__": _getitem, "__setitem__": _setitem,
    "__gt__": _compare(logical.gt), "__lt__": _compare(logical.lt), "__ge__": _compare(logical.ge),
    "__le__": _compare(logical.le), "__eq__": _compare(logical.eq), "__ne__": _compare(logical.ne),
    "__and__": logical.bitwise_and, "__rand__": _flip(logical.bitwise_and), "__or__": logical.bitwise_or,
    "__ror__": _flip(logical.bitwise_or), "__xor__": logical.bitwise_xor, "__rxor__": _flip(logical.bitwise_xor),
    "__invert__": logical.bitwise_not, "__mod__": ops.remainder, "__rmod__": _flip(ops.remainder),
    "__floordiv__": ops.floor_divide, "__rfloordiv__": _flip(ops.floor_divide),
    "__lshift__": ops.bitwise_left_shift, "__rlshift__": _flip(ops.bitwise_left_shift),
    "__rshift__": ops.bitwise_right_shift, "__rrshift__": _flip(ops.bitwise_right_shift),
    "__iadd__": _inplace(ops.add, "__iadd__"), "__isub__": _inplace(ops.sub, "__isub__"),
    "__imul__": _inplace(ops.mul, "__imul__"), "__itruediv__": _inplace(ops.div, "__itruediv__"),
}
_METHODS.update(declaration.methods())   # the ops declared as methods (@declare(method=True))
_METHODS.update({name: _inplace(fn, name) for name, fn in declaration.inplace_forms().items()})
# Tensor methods that are no op of their own: written above, or Tensor's reads (view_tracking.py)
_METHODS.update({
    "max": _max, "min": _min, "flip": _flip_dims, "where": _where, "repeat_interleave": _repeat_interleave,
    "masked_select": lambda self, mask: mask_index.masked_select(self, mask), "index_put_": _index_put_,
    "masked_fill_": _masked_fill_, "zero_": _zero_, "fill_": _fill_, "copy_": _copy_,
    "to": to, "clone": clone, "type": _type, "cpu": lambda self: to(self, "cpu"), "cuda": _cuda,
    "pin_memory": _pin_memory, "t": lambda self: ops.transpose(self, 0, 1) if self.ndim == 2 else self,
    "float": _type_method(ggml.f32), "half": _type_method(ggml.f16), "bfloat16": _type_method(ggml.bf16),
    "int": _type_method(ggml.i32), "long": _type_method(INT64), "bool": _type_method(BOOL),
    "double": _type_method(ggml.dtypes.from_name("f64")), "char": _type_method(INT8),
    "byte": _type_method(UINT8), "short": _type_method(INT16),
    "is_contiguous": view_tracking.tensor_is_contiguous, "stride": view_tracking.stride,
    "storage_offset": view_tracking.storage_offset, "element_size": view_tracking.element_size,
    "data_ptr": view_tracking.data_ptr, "_base": property(view_tracking.base_of), "_is_view": view_tracking.is_view,
    "backward": _backward,
})
# a real tensor's complex-number views, as PyTorch's: its own real part and conjugate, no imaginary part
_METHODS.update({"real": property(lambda self: self), "imag": property(_imag), "conj": lambda self: self,
                 "resolve_conj": lambda self: self, "is_conj": lambda self: False, "conj_physical": lambda self: self,
                 "angle": complex_tensor.angle})
# torch.polygamma(n, x) is x.polygamma(n): the tensor is not the op's first argument
_METHODS.update({"polygamma": lambda self, n: ops.polygamma(n, self),
                 "polygamma_": _inplace(lambda self, n: ops.polygamma(n, self), "polygamma_")})
_UNWRAPPED = {"backward"}   # errors of a backward pass are its own: not renamed as an op's (boundary.py)

for _name, _fn in _METHODS.items():
    if not _name.startswith("_") and callable(_fn) and _name not in _UNWRAPPED:
        _fn = typed(_fn, _name, method=True)   # bad arguments raise as the functions do (boundary.py)
    setattr(Tensor, _name, _fn)
Tensor.__reduce__ = _reduce
Tensor.__hash__ = object.__hash__
Tensor.__new__ = staticmethod(legacy.tensor_new)   # PyTorch's legacy constructor: Tensor(2, 3), Tensor(data)
