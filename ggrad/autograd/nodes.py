"""The bridge from Tensors to GGML nodes: find the step, pass inputs in, wrap outputs.

Shapes: a Tensor's `shape` is numpy order (0 to 4 dims); GGML's `ne` is the reverse, padded with 1s.
`ne_of` is the one place where one becomes the other.
"""

import weakref

import numpy as np

from .. import ggml
from ..ggml import ops
from ..ggml.errors import DeviceError, ShapeError
from . import execution
from .tensor import Tensor


def ne_of(shape):
    """GGML `ne` (4 values, innermost first) of a numpy-order shape."""
    if len(shape) > 4:
        raise ShapeError(f"GGML tensors have at most 4 dimensions; got shape {tuple(shape)}")
    ne = [1, 1, 1, 1]
    for i, n in enumerate(reversed(shape)):
        ne[i] = int(n)
    return ne


def step_of(*tensors):
    """The pending Step of the device all `tensors` share (DeviceError when they differ)."""
    device = tensors[0].device
    for t in tensors[1:]:
        if t.device is not device and t.device != device:
            raise DeviceError(f"expected all tensors on the same device, got {device.torch_name} and "
                              f"{t.device.torch_name}; move one with .to(device)")
    return execution.current_step(device)


def arg(step, t):
    """The GGML node of `t` as an input of a new node in `step`.

    A realized input's memory (its Block) and metadata (its GTensor's context) stay alive until the
    step is computed, even if Python drops the tensor meanwhile.
    """
    block = t._block
    if block is not None:
        step.keep.append((block, t._g))
    return t._g


def contiguous(step, t):
    """`t`'s node, copied to contiguous memory when it is a strided view."""
    g = arg(step, t)
    if not ggml.lib.ggml_is_contiguous(g.ptr) or ggml.lib.ggml_is_transposed(g.ptr):
        g = ops.cont(step.context(), g)
    return g


def emit(step, gt, shape, dtype, device):
    """Wrap a new pending GGML node as a Tensor of `shape` (numpy order)."""
    t = Tensor.__new__(Tensor)
    t._g = gt
    t.shape = tuple(shape)
    t.dtype = dtype
    t.device = device
    t._block = None
    t._step = step
    t.requires_grad = False
    t.grad = None
    t.grad_fn = None
    t._output_nr = 0
    t._version = 0
    step.pending.append(weakref.ref(t))
    if execution.EAGER:
        execution.realize_step(step)
    return t


def like(step, gt, t):
    """`emit` a node with the shape, dtype and device of `t`."""
    return emit(step, gt, t.shape, t.dtype, t.device)


def leaf_from_numpy(array, dtype, device):
    """A pending leaf holding host data (uploaded when its step is computed)."""
    step = execution.current_step(device)
    shape = array.shape
    gt = step.context().new_tensor(dtype, ne_of(shape))
    raw = ggml.encode(np.ascontiguousarray(array), dtype)
    execution.upload(step, gt, raw)
    return emit(step, gt, shape, dtype, device)


def shape_tensor(step, shape, dtype=ggml.f32):
    """A metadata-only tensor whose shape GGML reads (repeat_back, get_rows_back); never computed."""
    return step.context().new_tensor(dtype, ne_of(shape))


def alias(t):
    """A new Tensor object for the same values, with no history (what `detach()` returns)."""
    a = Tensor.__new__(Tensor)
    a._g = t._g
    a.shape = t.shape
    a.dtype = t.dtype
    a.device = t.device
    a._block = t._block
    a._step = t._step
    a.requires_grad = False
    a.grad = None
    a.grad_fn = None
    a._output_nr = 0
    a._version = t._version
    if t._step is not None:
        t._step.pending.append(weakref.ref(a))
    return a
