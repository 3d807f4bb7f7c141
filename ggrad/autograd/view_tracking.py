"""Views that share storage with their base, as PyTorch's, in ggrad's functional graph.

ggrad never overwrites a tensor's memory: an in-place op rebinds the Tensor to a new value. Views are
kept by bookkeeping instead (functionalization). A view remembers its base (always the root, as
PyTorch's `_base`) and the steps that derive it from the base (ops/views.py, ops/indexing.py). Two rules make
a write through either side seen by the other:

- an in-place op on a view computes the view's new value, writes it into the base through the inverse
  of the steps (a slice-scatter, an inverse reshape or permute: GGML nodes with gradients, as PyTorch's
  CopySlices) and rebinds the base;
- whenever a base is rebound by an in-place op, every live view of it is derived again from the new base
  (view nodes, no copy), so views made earlier read the new values. The base holds its views weakly.

`detach()` is a view too (its writes change the base's values, not its history). Steps also carry
PyTorch's strides, so `is_contiguous`, `stride`, `storage_offset`, `data_ptr` and the
checks of `view` and of writes into expanded views answer as PyTorch's. A Tensor that has no views costs
one attribute test per in-place op and nothing otherwise.
"""

import weakref

import numpy as np

from . import grad_mode

MULTI_OUTPUT, NO_GRAD = "multi-output", "no-grad"   # PyTorch's creation metas that forbid in-place writes
DETACHED = "detached"   # through detach(): writes change the base's values, never its history
_OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
            "location. Please clone() the tensor before performing the operation.")


class ViewRecord:
    """How a view derives from its root `base`: the `steps`, PyTorch's creation `meta`, the tensor that
    PyTorch's `_base` names (`origin`: the root, or a detached tensor the view was taken of; None for
    detach() itself), cached geometry."""

    __slots__ = ("base", "steps", "meta", "origin", "_geometry")

    def __init__(self, base, steps, meta, origin):
        self.base, self.steps, self.meta, self.origin, self._geometry = base, steps, meta, origin, None

    def geometry(self):
        """(sizes, strides, offset) of the view in elements of its base's storage."""
        if self._geometry is None:
            sizes = self.base.shape
            geometry = (sizes, contiguous_strides(sizes), 0)
            for step in self.steps:
                geometry = step.geometry(*geometry)
            self._geometry = geometry
        return self._geometry


def track(out, x, step, meta=None):
    """Record `out`, just computed as `step.apply(x)`, as a view of x's storage; return it."""
    parent = x._view_of
    if parent is None:
        base, steps, origin = x, (step,), x
    else:
        base, steps = parent.base, parent.steps + (step,)
        origin = x if parent.origin is None else parent.origin
        if parent.meta == DETACHED or meta is None:
            meta = parent.meta
    if meta is None and base.requires_grad and not grad_mode.is_grad_enabled():
        meta = NO_GRAD
    out._view_of = ViewRecord(base, steps, meta, None if step.hides_base else origin)
    out._version = base._version
    live = base._views
    if live is None:
        base._views = [weakref.ref(out)]
    else:
        live.append(weakref.ref(out))
        if len(live) >= 16 and not len(live) & (len(live) - 1):   # at each power of two: drop the dead
            live[:] = [ref for ref in live if ref() is not None]
    return out


def geometry(t):
    """(sizes, strides, offset) of Tensor `t` in elements of its storage (a non-view is contiguous)."""
    record = t._view_of
    if record is None:
        return t.shape, contiguous_strides(t.shape), 0
    return record.geometry()


def contiguous_strides(sizes):
    strides, step = [], 1
    for n in reversed(sizes):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def is_contiguous(sizes, strides):
    """PyTorch's rule: row-major strides, ignoring dimensions of size 1 (and anything without elements)."""
    expected = 1
    for n, s in zip(reversed(sizes), reversed(strides)):
        if n == 0:
            return True
        if n != 1:
            if s != expected:
                return False
            expected *= n
    return True


def view_strides(sizes, strides, shape):
    """Strides that show storage laid out as (sizes, strides) in `shape` without a copy, or None where
    none exist (a reshape must copy; `view` raises). Dimensions are grouped into runs that are contiguous
    among themselves; each run must map onto whole dimensions of `shape`."""
    if not sizes or 0 in sizes:
        return contiguous_strides(shape)
    new = [0] * len(shape)
    target = len(shape) - 1
    run_stride, run, mapped = strides[-1], 1, 1
    for d in range(len(sizes) - 1, -1, -1):
        run *= sizes[d]
        if d == 0 or (sizes[d - 1] != 1 and strides[d - 1] != run * run_stride):
            while target >= 0 and (mapped < run or shape[target] == 1):
                new[target] = mapped * run_stride
                mapped *= shape[target]
                target -= 1
            if mapped != run:
                return None
            if d > 0:
                run_stride, run, mapped = strides[d - 1], 1, 1
    return tuple(new) if target == -1 else None


def viewable(x, shape):
    """Whether `x` can be shown in `shape` without a copy (always, unless x is a strided view)."""
    record = x._view_of
    if record is None:
        return True
    sizes, strides, _ = record.geometry()
    return view_strides(sizes, strides, shape) is not None


def blocks_across(t):
    """Whether `t` is a view of quantized blocks that do not run along its dimension 0 (a transposed
    quantized weight, `w.T`). GGML reads such a view only as a product's operand and cannot copy it apart
    from its blocks: it is never held as a copy (execution derives it again from its base after a
    compute), and its values are its base's, dequantized, then viewed."""
    return t._view_of is not None and t.dtype.is_quantized and t._node.nb[0] != t.dtype.type_size


def derive(base, steps):
    """The value of the view given by `steps` of `base`, as view nodes of base's current value."""
    for step in steps:
        base = step.apply(base)
    return base


def rederive(view):
    """Point `view` at view nodes of its base's current value (its base was computed: nothing was written,
    so its version stays)."""
    record = view._view_of
    view._rebind(derive(record.base, record.steps), write=False)


def write_back(base, steps, value):
    """`base` with `value` written where the view given by `steps` reads it: the inverse of each step,
    innermost first. Only steps that keep part of their input (slices) need the input's old value."""
    last = -1
    for i, step in enumerate(steps):
        if step.needs_base:
            last = i
    inputs = [base]
    for step in steps[:last]:
        inputs.append(step.apply(inputs[-1]))
    for i in range(len(steps) - 1, -1, -1):
        value = steps[i].scatter(inputs[i] if i <= last else None, value)
    return value


# ---- in-place writes -----------------------------------------------------------------------------
def check_writable(view, op):
    """The errors PyTorch raises for an in-place op on a view, before anything is built."""
    record = view._view_of
    base = record.base
    grad = grad_mode.is_grad_enabled() and record.meta != DETACHED
    if grad and base.requires_grad and base.is_leaf:
        raise RuntimeError(f"{op}: a view of a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    if grad and record.meta == MULTI_OUTPUT and (base.requires_grad or view.requires_grad):
        raise RuntimeError(f"{op}: Output of {view.grad_fn!r} is a view and is being modified inplace. This view "
                           "is the output of a function that returns multiple views. Such functions do not allow "
                           "the output views to be modified inplace. You should replace the inplace operation by "
                           "an out-of-place one.")
    if grad and record.meta == NO_GRAD and base.requires_grad:
        raise RuntimeError(f"{op}: A view was created in no_grad mode and is being modified inplace with grad "
                           "mode enabled. Move both the view and the inplace either inside the no_grad block or "
                           "outside it.")
    sizes, strides, _ = record.geometry()
    for n, s in zip(sizes, strides):
        if s == 0 and n > 1:
            raise RuntimeError(f"{op}: {_OVERLAP}")


def write_through(view, value):
    """Write `value` (of view's shape and dtype) into view's base, which every view then reads."""
    record = view._view_of
    base = record.base
    for step in record.steps:
        if not step.writable:
            raise RuntimeError(f"writing through {type(step).__name__} of an expanded view is not supported: "
                               "clone() the view first")
    if record.meta == DETACHED:   # the base's values change, its history stays
        with grad_mode.no_grad():
            base._rebind(write_back(base, record.steps, value.to(base.dtype)))
        refresh(base)
    else:
        set_value(base, write_back(base, record.steps, value.to(base.dtype)))
    return view


def set_value(t, value):
    """Rebind `t` to `value` as an in-place op does (with grad mode on, t takes value's history), then
    derive t's live views again."""
    t._rebind(value)
    if grad_mode.is_grad_enabled() and (value.grad_fn is not None or not t.is_leaf):
        t.grad_fn, t._output_nr = value.grad_fn, value._output_nr
        t.requires_grad = value.requires_grad
    if t._views:
        refresh(t)
    return t


def refresh(base):
    """Derive every live view of `base` again from its new value; a view that recorded gradients keeps
    recording them (to base's history), also when the write was made under no_grad."""
    enabled = grad_mode.is_grad_enabled()
    for ref in list(base._views):
        v = ref()
        if v is None:
            continue
        if enabled or not v.requires_grad:
            new = derive(base, v._view_of.steps)
        else:
            with grad_mode.enable_grad():
                new = derive(base, v._view_of.steps)
        v._rebind(new)
        v.grad_fn, v._output_nr, v.requires_grad = new.grad_fn, new._output_nr, new.requires_grad
        v._version = base._version


# ---- PyTorch's storage queries -----------------------------------------------------------------------
def tensor_is_contiguous(self, memory_format=None):
    sizes, strides, _ = geometry(self)
    return is_contiguous(sizes, strides)


def stride(self, dim=None):
    strides = geometry(self)[1]
    return strides if dim is None else strides[dim]


def storage_offset(self):
    return geometry(self)[2]


def element_size(self):
    """Bytes per element as PyTorch counts them (8 for int64, 1 for bool, whatever ggrad stores them as)."""
    host = getattr(self.dtype, "host", None)
    return np.dtype(host).itemsize if host is not None else self.dtype.type_size


def data_ptr(self):
    """An address-like integer: equal for tensors that start at the same element of one storage, and
    `element_size()` apart per element (storages are 2**32 bytes apart; GGML memory is not exposed);
    0 for a tensor without elements, as PyTorch."""
    if not self.numel():
        return 0
    record = self._view_of
    base = self if record is None else record.base
    return (id(base) << 32) + storage_offset(self) * element_size(self)


def base_of(self):
    """PyTorch's `_base`: the tensor this view shares storage with (None for a non-view)."""
    record = self._view_of
    return None if record is None else record.origin


def is_view(self):
    record = self._view_of
    return record is not None and record.origin is not None
