"""Creating tensors: from data, constants, ranges, random numbers (a seeded host generator).

Random values are drawn on the host with numpy's PCG64 generator, seeded by `manual_seed`, so runs
are reproducible on every backend.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Sequence

import numpy as np

from .. import ggml
from ..ggml.errors import ArgumentError, DTypeError, ShapeError, UnsupportedDTypeError
from . import recording, replay_notes, sizes
from .tensor import Tensor
from .generator import Generator
from .torch_dtypes import BOOL, INT8, INT16, INT64, UINT8, refuse_float64, resolve, to_storage
from .typing_aliases import ArrayLike, DeviceLike, DTypeLike, Number, Size
from .declaration import declare

default_generator = Generator().manual_seed(0)   # PyTorch's torch.default_generator
_HOST = np.dtype(np.float64)   # the factories' host values are float64 or int64 before conversion


def manual_seed(seed: int) -> int:
    """Seed the generator behind rand, randn, randint, dropout and layer initialisation."""
    if not isinstance(seed, numbers.Integral):
        raise TypeError(f"manual_seed: expected an int, got {type(seed).__name__}")
    default_generator.manual_seed(int(seed))
    return seed


def initial_seed() -> int:
    """The seed the default generator started from (PyTorch's torch.initial_seed)."""
    return default_generator.initial_seed()


def generator(source: Generator | None = None) -> np.random.Generator:
    """The numpy stream of `source` (a caller's Generator, PyTorch's `generator=` argument), else of the
    default generator."""
    if source is None:
        return default_generator.numpy
    if not isinstance(source, Generator):
        raise TypeError(f"generator must be a ggrad.Generator, not {type(source).__name__}")
    return source.numpy


_stream = generator   # the factories' own name for it: their `generator` argument shadows the function


def seed() -> int:
    """Reseed the default generator from fresh entropy; returns the seed (PyTorch's torch.seed)."""
    return default_generator.seed()


def get_rng_state() -> Tensor:
    """The default generator's state as a uint8 tensor, for `set_rng_state` (its bytes are ggrad's own,
    not PyTorch's Mersenne Twister state)."""
    return tensor(np.frombuffer(default_generator.state_bytes(), dtype=np.uint8), dtype=UINT8)


def set_rng_state(new_state: Tensor) -> None:
    """Continue the default generator from a state `get_rng_state` gave."""
    data = new_state.numpy() if isinstance(new_state, Tensor) else np.asarray(new_state)
    default_generator.load_state_bytes(data.astype(np.uint8).tobytes())


def _resolve_dtype(dtype, array):
    if dtype is not None:
        return refuse_float64(resolve(dtype), "tensor")
    kind = array.dtype.kind
    if kind == "f":
        return ggml.f16 if array.dtype == np.float16 else ggml.f32
    small = {np.dtype(np.int8): INT8, np.dtype(np.uint8): UINT8, np.dtype(np.int16): INT16}
    if array.dtype in small:
        return small[array.dtype]
    if kind in "iu":   # as PyTorch: int32 stays int32, Python ints and int64 are int64
        return ggml.i32 if array.dtype.itemsize <= 4 and array.dtype != np.uint32 else INT64
    if kind == "b":
        return BOOL
    raise DTypeError(f"cannot make a tensor from numpy dtype {array.dtype}")


def _host_array(array, dtype):
    stored = to_storage(array, dtype)
    if stored is not None:
        return stored
    if dtype.numpy is not None and dtype.name != "bf16":
        return array.astype(dtype.numpy, copy=False)
    return array.astype(np.float32, copy=False)


_complex_leaf = []   # complex_tensor.py's maker of complex leaves (it builds on this module): (array, device,
                     # requires_grad) -> a complex tensor


def complex_leaves(maker: Callable[[np.ndarray, Any, bool], Any]) -> None:
    """Called once by complex_tensor.py: complex data and complex dtypes make their leaves with `maker`."""
    _complex_leaf[:] = [maker]


def _is_complex(dtype):
    return getattr(dtype, "is_complex", False) is True


def tensor(data: ArrayLike,
           dtype: DTypeLike | None = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of `data` (numpy array, nested lists, scalar or Tensor); complex data
    (or `dtype=complex64`) makes a complex tensor (complex_tensor.py)."""
    dev = ggml.device(device)
    if isinstance(data, Tensor):
        data = data.numpy()
    array = np.asarray(data)
    if (dtype is None and array.dtype.kind == "c") or _is_complex(dtype):
        return _complex_leaf[0](array, dev, requires_grad)
    if array.dtype == object:
        raise TypeError("tensor: data must be numbers or (nested) sequences of numbers")
    dt = _resolve_dtype(dtype, array)
    t = recording.leaf(dev, _host_array(array, dt), dt)
    if requires_grad:
        t.requires_grad_(True)
    return t


def as_tensor(data: ArrayLike, dtype: DTypeLike | None = None, device: DeviceLike | None = None) -> Tensor:
    """`data` as a tensor: a Tensor of that dtype and device is returned itself (PyTorch's torch.as_tensor);
    anything else is converted as `tensor` does (a copy: GGML's buffers are not numpy memory)."""
    if isinstance(data, Tensor):
        return data.to(dtype=dtype, device=device) if dtype is not None or device is not None else data
    return tensor(data, dtype=dtype, device=device)


def from_numpy(array: np.ndarray) -> Tensor:
    return tensor(array)


def _shape(size, what="zeros"):
    """The shape of `zeros(*size)`: ints, or one sequence of them, checked as PyTorch checks them."""
    if not size:
        raise TypeError(f"{what}() missing 1 required positional argument: 'size'")
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return _checked_size(size, what)


def _checked_size(size, what):
    """`size` as a tuple of ints: TypeError for anything but ints (0-d int tensors count, as in PyTorch),
    ShapeError (a RuntimeError) for a negative one or for sizes whose product overflows (sizes.py)."""
    dims = []
    for s in size:
        if isinstance(s, Tensor) and s.ndim == 0 and not s.is_floating_point() and s.dtype != BOOL:
            s = s.item()
        if isinstance(s, bool) or not isinstance(s, numbers.Integral):
            raise TypeError(f"{what}(): size must be a tuple of ints, but found an element of type "
                            f"{type(s).__name__}")
        if s < 0:
            raise ShapeError(f"{what}(): trying to create a tensor with negative dimension {s}: {list(size)}")
        dims.append(int(s))
    sizes.check(f"{what}()", dims, _HOST)
    return tuple(dims)


def full(size: Size, fill_value: Number,
         dtype: DTypeLike | None = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    if not isinstance(size, (tuple, list)):
        size = (size,)   # an extension: PyTorch's full wants a sequence
    size = _checked_size(size, "full")
    if isinstance(fill_value, (complex, np.complexfloating)) or _is_complex(dtype):
        return tensor(np.full(size, fill_value, dtype=np.complex64), dtype, device, requires_grad)
    if dtype is None:
        dtype = BOOL if isinstance(fill_value, bool) else INT64 if isinstance(fill_value, numbers.Integral) else ggml.f32
    dt = resolve(dtype)
    return tensor(np.full(size, fill_value, dtype=np.float64 if dt.is_float else np.int64), dt, device,
                  requires_grad)


def zeros(*size: int | Sequence[int],
          dtype: DTypeLike | None = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    return full(_shape(size, "zeros"), 0.0, dtype or ggml.f32, device, requires_grad)


def ones(*size: int | Sequence[int],
         dtype: DTypeLike | None = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    return full(_shape(size, "ones"), 1.0, dtype or ggml.f32, device, requires_grad)


def empty(*size: int | Sequence[int],
          dtype: DTypeLike | None = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    return full(_shape(size, "empty"), 0.0, dtype or ggml.f32, device, requires_grad)


def _like(t, dtype, device):
    return (t.dtype if dtype is None else dtype), (t.device if device is None else device)


def zeros_like(t: Tensor, dtype: DTypeLike | None = None,
               device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    dt, dev = _like(t, dtype, device)
    return full(t.shape, 0, dt, dev, requires_grad)


def ones_like(t: Tensor, dtype: DTypeLike | None = None,
              device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    dt, dev = _like(t, dtype, device)
    return full(t.shape, 1, dt, dev, requires_grad)


def full_like(t: Tensor, fill_value: Number, dtype: DTypeLike | None = None,
              device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    dt, dev = _like(t, dtype, device)
    return full(t.shape, fill_value, dt, dev, requires_grad)


def empty_like(t: Tensor, dtype: DTypeLike | None = None,
               device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    return zeros_like(t, dtype, device, requires_grad)


@declare(function=False, method=True)
def new_full(t: Tensor, size: Size, fill_value: Number,
             dtype: DTypeLike | None = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    """`t.new_full(size, v)`: a tensor of `size` filled with v, with t's dtype and device unless given."""
    dt, dev = _like(t, dtype, device)
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"new_full(): size must be a tuple of ints, not {type(size).__name__}")
    return full(_checked_size(size, "new_full"), fill_value, dt, dev, requires_grad)


@declare(function=False, method=True)
def new_zeros(t: Tensor, *size: int | Sequence[int], dtype: DTypeLike | None = None,
              device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    return new_full(t, _shape(size, "new_zeros"), 0, dtype, device, requires_grad)


@declare(function=False, method=True)
def new_ones(t: Tensor, *size: int | Sequence[int],
             dtype: DTypeLike | None = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    return new_full(t, _shape(size, "new_ones"), 1, dtype, device, requires_grad)


@declare(function=False, method=True)
def new_empty(t: Tensor, *size: int | Sequence[int], dtype: DTypeLike | None = None,
              device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    return new_full(t, _shape(size, "new_empty"), 0, dtype, device, requires_grad)


@declare(function=False, method=True)
def new_tensor(t: Tensor, data: ArrayLike, dtype: DTypeLike | None = None,
               device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    """`t.new_tensor(data)`: a copy of data with t's dtype and device unless given (never shares memory)."""
    dt, dev = _like(t, dtype, device)
    if isinstance(data, str):
        raise TypeError("new_tensor(): invalid data type 'str'")
    return tensor(data, dt, dev, requires_grad)   # tensor() copies a Tensor's values too


def arange(start: Number, end: Number | None = None, step: Number = 1,
           dtype: DTypeLike | None = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ArgumentError("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise ArgumentError("arange: upper bound and lower bound inconsistent with step sign")
    sizes.check("arange()", (math.ceil((end - start) / step),), _HOST)
    values = np.arange(start, end, step)
    if dtype is None:
        dtype = ggml.f32 if values.dtype.kind == "f" else INT64
    return tensor(values, dtype, device, requires_grad)


def eye(n: int, m: int | None = None,
        dtype: DTypeLike | None = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    sizes.check("eye()", (n, n if m is None else m), _HOST)
    return tensor(np.eye(n, m), dtype or ggml.f32, device, requires_grad)


def rand(*size: int | Sequence[int], generator: Generator | None = None,
         dtype: DTypeLike | None = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    shape = _shape(size, "rand")
    if _is_complex(dtype):   # real and imaginary parts each uniform in [0, 1), as PyTorch
        return tensor(_complex_draw(_stream(generator).random, shape, 1.0), dtype, device, requires_grad)
    return tensor(_stream(generator).random(shape), dtype or ggml.f32, device, requires_grad)


def randn(*size: int | Sequence[int], generator: Generator | None = None,
          dtype: DTypeLike | None = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    shape = _shape(size, "randn")
    if _is_complex(dtype):   # real and imaginary parts each of variance 1/2, as PyTorch's complex normal
        values = _complex_draw(_stream(generator).standard_normal, shape, 0.5 ** 0.5)
        return tensor(values, dtype, device, requires_grad)
    return tensor(_stream(generator).standard_normal(shape), dtype or ggml.f32, device, requires_grad)


def _complex_draw(draw, shape, scale):
    parts = draw(shape + (2,)) * scale
    return parts[..., 0] + 1j * parts[..., 1]


def randint(low: int, high: int | Sequence[int] | None = None, size: Sequence[int] | None = None,
            generator: Generator | None = None,
            dtype: DTypeLike | None = None, device: DeviceLike | None = None) -> Tensor:
    """Integers in [low, high): `randint(high, size)` or `randint(low, high, size)`, as PyTorch."""
    if size is None and isinstance(high, (tuple, list)):
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint() missing 1 required positional argument: 'size'")
    if low >= high:
        raise ArgumentError(f"randint: expects 'from' < 'to', got from={low} >= to={high}")
    values = _stream(generator).integers(low, high, size=_checked_size(tuple(size), "randint"))
    return tensor(values, dtype or INT64, device)


def rand_like(t: Tensor, dtype: DTypeLike | None = None, device: DeviceLike | None = None) -> Tensor:
    dt, dev = _like(t, dtype, device)
    return rand(t.shape, dtype=dt, device=dev)


def randn_like(t: Tensor, dtype: DTypeLike | None = None, device: DeviceLike | None = None) -> Tensor:
    dt, dev = _like(t, dtype, device)
    return randn(t.shape, dtype=dt, device=dev)


def randint_like(t: Tensor, low: int = 0, high: int | None = None, *, dtype: DTypeLike | None = None,
                 device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    """Integers in [low, high) of t's shape, dtype and device: `randint_like(t, high)` or `(t, low, high)`."""
    if high is None:
        low, high = 0, low
    dt, dev = _like(t, dtype, device)
    return randint(low, high, t.shape, dtype=dt, device=dev)


def bernoulli_mask(shape: Sequence[int], keep: float, scale: float = 1.0,
                   device: DeviceLike | None = None) -> Tensor:
    """A float tensor with `scale` where a draw succeeded (probability `keep`) and 0 elsewhere, drawn on the
    host from the default generator (a step that compile_step replays draws its masks again, in order)."""
    mask = tensor(_mask_values(shape, keep, scale), ggml.f32, device)
    if replay_notes.active() is not None:
        replay_notes.note(_ReplayedMask(mask._node, shape, keep, scale))
    return mask


def _mask_values(shape, keep, scale):
    keep_mask = _stream().random(shape, dtype=np.float32) < keep
    return keep_mask.astype(np.float32) * np.float32(scale)


class _ReplayedMask(replay_notes.Action):
    """A mask of bernoulli_mask drawn again (the next draws of the generator) at each replay of a step."""

    def __init__(self, node, shape, keep, scale):
        self.node, self.shape, self.keep, self.scale = node, shape, keep, scale
        self.nodes = (node,)

    def before(self):
        self.node.write(ggml.encode(_mask_values(self.shape, self.keep, self.scale), ggml.f32))


def linspace(start: Number, end: Number, steps: int,
             dtype: DTypeLike | None = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    """`steps` values from start to end, evenly spaced: the first half counted from start, the second
    back from end, as PyTorch computes them for float32."""
    if getattr(dtype, "name", None) == "bool":
        raise UnsupportedDTypeError("linspace: not implemented for bool (as PyTorch's \"linspace_cpu\")")
    return tensor(_linspace_values(start, end, steps), dtype or ggml.f32, device, requires_grad)


def _linspace_values(start, end, steps):
    """linspace's values on the host (float64 holding float32 roundings)."""
    steps = int(steps)
    if steps < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got {steps}")
    sizes.check("linspace()", (steps,), _HOST)
    i = np.arange(steps, dtype=np.float64)
    start32, end32 = np.float32(start), np.float32(end)
    step = np.float64((end32 - start32) / np.float32(steps - 1)) if steps > 1 else 0.0   # a float32 step
    # each value rounded once from the exact start + step * i (as a fused multiply-add)
    values = np.where(i < steps // 2, np.float64(start32) + step * i, np.float64(end32) - step * (steps - 1 - i))
    if steps == 1:
        values = np.array([start32], dtype=np.float64)
    return values


def logspace(start: Number, end: Number, steps: int, base: float = 10.0,
             dtype: DTypeLike | None = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    exponents = _linspace_values(start, end, steps).astype(np.float32).astype(np.float64)
    values = np.power(float(base), exponents)
    return tensor(values, dtype or ggml.f32, device, requires_grad)


def randperm(n: int, generator: Generator | None = None,
             dtype: DTypeLike | None = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    """A random permutation of 0..n-1 from the seeded generator, int64 as PyTorch."""
    sizes.check("randperm()", (int(n),), _HOST)
    return tensor(_stream(generator).permutation(int(n)), dtype or INT64, device, requires_grad)
