"""PyTorch's in-place view ops: `t_`, `transpose_`, `swapdims_`, `swapaxes_`, `squeeze_`, `unsqueeze_`.

The Tensor object itself becomes the view (its shape, strides and history change; its storage does not),
as PyTorch's. In ggrad's bookkeeping (view_tracking.py) a storage is held by a root tensor whose value
is laid out contiguously, so a root that changes its layout hands its storage, history and earlier views
to a new hidden root and becomes a view of it (with no `_base`, as in PyTorch: it is no view to the
user). The storage's version counter moves, as for any in-place op. Writes through it or through the earlier views then reach the same storage, with gradients.
A leaf that requires grad keeps being that leaf: under no_grad its value takes the new layout (allowed
only while it has no live views; with grad on PyTorch's leaf error is raised).
"""

import weakref

from . import grad_mode, view_tracking
from .ops import views
from .recording import alias
from .declaration import declare


def _live_views(t):
    return [ref for ref in (t._views or ()) if ref() is not None]


def _hand_storage_over(x):
    """A new root holding x's storage, value, history and live views (x is a root)."""
    holder = alias(x)
    holder.grad_fn, holder._output_nr, holder.requires_grad = x.grad_fn, x._output_nr, x.requires_grad
    holder._views, x._views = x._views, None
    for ref in holder._views or ():
        v = ref()
        if v is not None:
            v._view_of.base = holder
    return holder


def _become(x, make, op):
    """Make x the view `make(x)` in place; return x."""
    record = x._view_of
    if record is None and x.is_leaf and x.requires_grad:
        if grad_mode.is_grad_enabled():
            raise RuntimeError(f"{op}: a leaf Variable that requires grad is being used in an in-place operation.")
        if _live_views(x):
            raise RuntimeError(f"{op}: changing the layout of a leaf that requires grad while views of it are "
                               "alive is not supported by ggrad; clone() it first")
        with grad_mode.no_grad():
            new = make(x)
        if new is not x:
            x._rebind(new.contiguous())
        return x
    source = x if record is not None else _hand_storage_over(x)
    new = make(source)
    if new is source:
        if source is not x:   # nothing changed: x takes its storage back
            x._views, source._views = source._views, None
            for ref in x._views or ():
                if ref() is not None:
                    ref()._view_of.base = x
        return x
    new_record = new._view_of
    x._rebind(new)
    x.grad_fn, x._output_nr, x.requires_grad = new.grad_fn, new._output_nr, new.requires_grad
    origin = None if record is None else new_record.origin
    x._view_of = view_tracking.ViewRecord(new_record.base, new_record.steps, new_record.meta, origin)
    base = new_record.base
    live = base._views
    live[:] = [ref for ref in live if ref() is not None and ref() is not new] + [weakref.ref(x)]
    base._version = max(base._version, x._version - 1) + 1   # an in-place op: the storage's version moves
    view_tracking.refresh(base)   # every view of the storage (x too) reads the new version
    return x


@declare(function=False, method=True)
def t_(self):
    if self.ndim > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    return _become(self, lambda x: views.transpose(x, 0, 1), "t_")


@declare(function=False, method=True, aliases=("swapdims_", "swapaxes_"))
def transpose_(self, dim0, dim1):
    return _become(self, lambda x: views.transpose(x, dim0, dim1), "transpose_")


_EVERY = object()   # squeeze_()'s default: every size-1 dim (an explicit None is refused, as PyTorch)


@declare(function=False, method=True)
def squeeze_(self, dim=_EVERY):
    """squeeze_() drops every size-1 dim, squeeze_(d) or squeeze_((d0, d1)) those named."""
    if dim is not _EVERY and (not isinstance(dim, (int, tuple, list)) or isinstance(dim, bool)):
        raise TypeError(f"squeeze_(): expected dim to be an int or a tuple of ints, got {dim!r:.60}")
    return _become(self, lambda x: views.squeeze(x, None if dim is _EVERY else dim), "squeeze_")


@declare(function=False, method=True)
def unsqueeze_(self, dim):
    return _become(self, lambda x: views.unsqueeze(x, dim), "unsqueeze_")


METHODS = {"t_": t_, "transpose_": transpose_, "swapdims_": transpose_, "swapaxes_": transpose_,
           "squeeze_": squeeze_, "unsqueeze_": unsqueeze_}
