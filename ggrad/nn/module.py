"""`Module`: the base class of layers and models, as in PyTorch.

Assigning a `Parameter` or a `Module` to an attribute registers it (`__setattr__` routes it into
`_parameters` / `_modules`); `register_buffer` adds non-learnable state. One generator,
`_named_members`, walks the tree with a memo set (a module or tensor shared by two owners counts
once); `parameters`, `buffers`, `state_dict`, `zero_grad`, `to` and the rest are built on it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Iterator, Mapping, TypeVar

import numpy as np

from .. import ggml
from ..autograd import Tensor, no_grad
from ..autograd.factory import tensor, zeros_like
from ..autograd.ops import quantize
from ..autograd.complex_tensor import ComplexTensor, view_as_complex
from ..autograd.raw import from_raw, to_raw
from ..ggml.errors import ShapeError
from ..autograd import Parameter
from ..autograd.typing_aliases import DeviceLike, DTypeLike
from .hooks import ModuleHooks, call_with_hooks

T = TypeVar("T", bound="Module")   # the methods that return self return the caller's own class


class Module(ModuleHooks):
    """Base class of every layer and model: subclass it, assign submodules and Parameters in
    `__init__`, write `forward`. Calling the module calls `forward` (through its hooks, if any: hooks.py).

    Attributes:
        training: True in training mode (`train()`), False in evaluation mode (`eval()`).
    """

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"Module [{type(self).__name__}] is missing the required \"forward\" function")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if "_hooks" not in self.__dict__:
            return self.forward(*args, **kwargs)
        return call_with_hooks(self, args, kwargs)

    # ---- registration ----------------------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, keep="_parameters")
            params[name] = value
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(ggrad.nn.Parameter or None expected)")
            params[name] = None
            return
        modules = self.__dict__.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, keep="_modules")
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                "(ggrad.nn.Module or None expected)")
            modules[name] = None
            return
        buffers = self.__dict__.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(ggrad.Tensor or None expected)")
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def _forget(self, name, keep=None):
        """Drop `name` from every registry but `keep` and from the instance dict (it is about to be
        re-registered; in `keep` it keeps its position, so parameter and state_dict order don't change)."""
        self.__dict__.pop(name, None)
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry != keep:
                self.__dict__[registry].pop(name, None)
        self.__dict__["_non_persistent_buffers"].discard(name)

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: look in the registries.
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            entries = d.get(registry)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for registry in ("_parameters", "_buffers", "_modules"):
            entries = self.__dict__[registry]
            if name in entries:
                del entries[name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a Parameter (or None, a placeholder) under `name`."""
        self._check_name(name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(ggrad.nn.Parameter or None required)")
        self._forget(name)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a Tensor that is module state but not learnable (saved in state_dict when persistent)."""
        self._check_name(name, "buffer")
        if tensor is not None and not isinstance(tensor, (Tensor, ComplexTensor)):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(ggrad.Tensor or None required)")
        self._forget(name)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent_buffers.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module under `name` (None is a placeholder)."""
        self._check_name(name, "module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._forget(name)
        self._modules[name] = module

    register_module = add_module

    def _check_name(self, name, kind):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
        if name == "" or "." in name:
            raise KeyError(f"{kind} name can't be empty or contain \".\", got {name!r}")

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path `target` ('' is this module)."""
        module = self
        for part in target.split(".") if target else ():
            child = module._modules.get(part)
            if child is None:
                raise AttributeError(f"{module._get_name()} has no submodule '{part}' (looking up '{target}')")
            module = child
        return module

    # ---- walking the tree ------------------------------------------------------------------------
    def named_modules(self, memo: set[int] | None = None, prefix: str = "",   # memo: ids of modules seen
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """(dotted name, module) for this module and every descendant, each once."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is None:
                continue
            yield from child.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self) -> Iterator[Module]:
        for _, child in self.named_children():
            yield child

    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        """The one walk behind named_parameters and named_buffers: each tensor once (by identity)."""
        memo = set()
        owners = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for owner_prefix, owner in owners:
            for name, value in get_members(owner):
                if value is None or (remove_duplicate and id(value) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(value))
                yield owner_prefix + ("." if owner_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, Parameter) for every parameter; a shared one is listed once, under its first name."""
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def apply(self: T, fn: Callable[[Module], None]) -> T:
        """Call `fn(module)` on every child (recursively), then on this module; returns self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ---- modes and gradients ---------------------------------------------------------------------
    def train(self: T, mode: bool = True) -> T:
        """Set training mode (dropout active) on this module and its descendants; returns self."""
        if not isinstance(mode, bool):
            raise ValueError(f"training mode is expected to be boolean, got {mode!r}")
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self: T) -> T:
        """Evaluation mode: `train(False)`."""
        return self.train(False)

    def requires_grad_(self: T, requires_grad: bool = True) -> T:
        """Turn gradient recording of every parameter on or off (freezing); returns self."""
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradient of every parameter: to None (default) or to zeros."""
        for param in self.parameters():
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:
                param.grad = zeros_like(param.grad)

    # ---- devices and dtypes ----------------------------------------------------------------------
    def to(self: T, *args: DeviceLike | DTypeLike, **kwargs: Any) -> T:
        """Move parameters and buffers to a device and/or cast floating ones to a dtype, in place.

        `model.to("cpu")`, `model.to(ggrad.float16)`, `model.to(device=..., dtype=...)`. Parameters keep
        their identity (an optimizer built before still holds them); integer tensors keep their dtype.
        """
        device, dtype = _parse_to(args, kwargs)

        def convert(t):
            if isinstance(t, ComplexTensor):   # complex buffers move; a dtype is for floating tensors
                return t if device is None or t.device == device else t.to(device)
            want_dtype = dtype if dtype is not None and t.dtype.is_float else t.dtype
            want_device = t.device if device is None else device
            if want_dtype is t.dtype and want_device == t.device:
                return t
            if t.dtype.is_quantized:   # its blocks bit for bit (numpy() would dequantize)
                return from_raw(to_raw(t), t.dtype, t.shape, want_device)
            # A fresh leaf (through the host): a parameter whose value is a pending computed node makes
            # the fused optimizer updates abort in GGML.
            return tensor(t.detach().numpy(), dtype=want_dtype, device=want_device)

        for module in self.modules():
            for name, param in module._parameters.items():
                if param is None:
                    continue
                moved = convert(param)
                if moved is not param:
                    param._rebind(moved)
                if param.grad is not None:
                    param.grad = convert(param.grad)
            for name, buf in module._buffers.items():
                if buf is not None:
                    module._buffers[name] = convert(buf)
        return self

    def cpu(self: T) -> T:
        return self.to("cpu")

    def cuda(self: T, device: int | DeviceLike | None = None) -> T:
        """Move parameters and buffers to a CUDA device (an index, a name or a Device; default the first)."""
        return self.to("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))

    def float(self: T) -> T:
        return self.to(ggml.f32)

    def half(self: T) -> T:
        return self.to(ggml.f16)

    def bfloat16(self: T) -> T:
        return self.to(ggml.bf16)

    # ---- state -----------------------------------------------------------------------------------
    def state_dict(self, destination: dict[str, Tensor] | None = None, prefix: str = "",
                   keep_vars: bool = False) -> dict[str, Tensor]:
        """An OrderedDict of every parameter and persistent buffer by dotted name.

        Values are detached tensors (sharing memory with the module's, as in PyTorch); `keep_vars=True`
        returns the Parameters themselves.
        """
        out = OrderedDict() if destination is None else destination
        for module_prefix, module in self.named_modules(prefix=prefix, remove_duplicate=False):
            dot = module_prefix + ("." if module_prefix else "")
            for name, param in module._parameters.items():
                if param is not None:
                    out[dot + name] = param if keep_vars else param.detach()
            for name, buf in module._buffers.items():
                if buf is not None and name not in module._non_persistent_buffers:
                    out[dot + name] = buf if keep_vars else buf.detach()
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> _IncompatibleKeys:
        """Copy values from `state_dict` into this module's parameters and persistent buffers.

        Args:
            state_dict (Mapping[str, Tensor | numpy.ndarray]): values by dotted name, as `state_dict()` gives.
            strict (bool, default True): raise when keys are missing or unexpected. Shape mismatches
                raise either way; nothing is copied when an error is raised.

        Returns:
            `(missing_keys, unexpected_keys)`, a named tuple of lists.
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"load_state_dict: expected a dict-like state_dict, got {type(state_dict).__name__}")
        targets = self.state_dict(keep_vars=True)
        missing = [k for k in targets if k not in state_dict]
        unexpected = [k for k in state_dict.keys() if k not in targets]
        errors = []
        if strict and unexpected:
            errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
        if strict and missing:
            errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
        values = {}
        for key, target in targets.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            shape = tuple(value.shape) if hasattr(value, "shape") else np.shape(value)
            if shape != target.shape:
                errors.append(f"size mismatch for {key}: copying a param with shape {shape} from checkpoint, "
                              f"the shape in current model is {target.shape}.")
            else:
                values[key] = value
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {self._get_name()}:\n\t" + "\n\t".join(errors))
        for key, value in values.items():
            _copy_into(targets[key], value)
        return _IncompatibleKeys(missing, unexpected)

    # ---- printing --------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text inside this module's parentheses in `repr` (its configuration); '' by default."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + _indent(repr(child), 2) for name, child in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                body = extra_lines[0]
            else:
                body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{self._get_name()}({body})"


class _IncompatibleKeys(tuple):
    """`(missing_keys, unexpected_keys)` returned by `load_state_dict`."""

    def __new__(cls, missing_keys, unexpected_keys):
        return super().__new__(cls, (missing_keys, unexpected_keys))

    @property
    def missing_keys(self) -> list[str]:
        return self[0]

    @property
    def unexpected_keys(self) -> list[str]:
        return self[1]

    def __repr__(self):
        if not self[0] and not self[1]:
            return "<All keys matched successfully>"
        return f"_IncompatibleKeys(missing_keys={self[0]}, unexpected_keys={self[1]})"


def _indent(text, spaces):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


def _parse_to(args, kwargs):
    """(device or None, dtype or None) from `to()`'s arguments, as Tensor.to accepts them."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    if kwargs:
        raise TypeError(f"to(): unexpected arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, ggml.DType) or (isinstance(a, str) and _is_dtype_name(a)):
            dtype = a
        else:
            device = a
    if dtype is not None:
        dtype = ggml.as_dtype(dtype)
        if not dtype.is_float:
            raise TypeError(f"Module.to only accepts floating point dtypes, but got desired dtype={dtype.name}")
    if device is not None:
        device = ggml.device(device)
    return device, dtype


def _is_dtype_name(name):
    try:
        ggml.as_dtype(name)
    except Exception:  # noqa: BLE001  (not a dtype name: treat it as a device)
        return False
    return True


def _copy_into(target, value):
    """Copy `value` (Tensor, numpy array or nested list) into `target`, through the host.

    The copy is a fresh leaf: `target` must not share memory with the caller's tensor (optimizers update
    parameters in place), and a parameter whose value is a pending computed node makes the fused
    optimizer updates abort in GGML.
    """
    with no_grad():
        if isinstance(target, ComplexTensor):   # a complex buffer: its real and imaginary parts
            values = value.detach().numpy() if isinstance(value, (Tensor, ComplexTensor)) else value
            values = np.asarray(values, np.complex64)
            return target.copy_(view_as_complex(tensor(np.stack([values.real, values.imag], -1))))
        if target.dtype.is_quantized:   # bit for bit from the same type, else quantized from the values
            if not (isinstance(value, Tensor) and value.dtype is target.dtype):
                value = quantize(tensor(value.detach().numpy() if isinstance(value, Tensor) else value), target.dtype)
            return target._rebind(from_raw(to_raw(value), target.dtype, target.shape, target.device))
        host = value.detach().numpy() if isinstance(value, Tensor) else np.asarray(value)
        src = tensor(host, dtype=target.dtype, device=target.device)
        if tuple(src.shape) != target.shape:
            raise ShapeError(f"cannot copy a value of shape {src.shape} into a tensor of shape {target.shape}")
        target.copy_(src)
