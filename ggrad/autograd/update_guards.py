"""Updates that a value of the same graph may cancel: inside `skipped_if_nan(check)` the in-place updates
scheduled on `check`'s device (optim/fused_updates.py) take effect only if `check` is not nan, chosen on the
device with no host round trip. A GradScaler's step (ggrad/amp) so stays one graph whether it is skipped or not.
"""

import contextlib
import contextvars

import numpy as np

from ..ggml import f32, i32, ops
from .factory import arange, full, tensor
from .ops.unary import Step
from .primitive import Primitive

_EXACT_ROWS = 1 << 22   # row indices up to 2 * this are exact in float32
_guards = contextvars.ContextVar("update_guards", default=None)


def guard_of(device):
    """The guard of the `skipped_if_nan` block around the caller on `device`, or None."""
    guards = _guards.get()
    return None if guards is None else guards.get(device.name)


@contextlib.contextmanager
def skipped_if_nan(check):
    """Within the block, updates scheduled on `check`'s device take effect only if the 0-d float32 tensor
    `check` (computed in the same graph) is not nan; otherwise each writes back the values it would
    replace. The choice is made on the device: no host round trip before the update."""
    guards = dict(_guards.get() or {})
    guards[check.device.name] = _Guard(check)
    token = _guards.set(guards)
    try:
        yield
    finally:
        _guards.reset(token)


class _Guard:
    """The selections of one conditional step on one device. Each picks whole rows with get_rows from
    [new rows; fallback rows] by an index computed from the check, so an inf or nan in the branch not
    taken never reaches the result (a product with a 0/1 flag would turn 0 * inf into nan). An update that
    reads `check` itself (ggrad's AdamW kernel) needs no selection."""

    def __init__(self, check):
        self.device = check.device
        self.check = check.detach()
        self._cache = {}

    @property
    def ok(self):
        """1 when the check is finite, 0 when nan (nan > 0 is false)."""
        return self._once("ok", lambda: Step.apply(self.check + 1.0))

    @property
    def bad(self):
        return self._once("bad", lambda: 1.0 - self.ok)

    def _once(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def select(self, new, fallback):
        """`new` if the check is finite, else `fallback`, a tensor of new's shape."""
        if new.numel() == 0:
            return new
        rows, width = _rows(new.shape)
        return _Pick.apply(new, fallback, self._index(rows, whole=True), width)

    def choice(self, new, fallback):
        """(fallback row, index, width) that select `new` or the number `fallback` inside an update's
        event (optim/fused_updates.py, `picked`)."""
        rows, width = _rows(new.shape)
        row = self._once(("row", width, str(fallback)),
                         lambda: full((1, width), fallback, dtype=f32, device=self.device))
        return row, self._index(rows, whole=False), width

    def _index(self, rows, whole):
        """Row indices into [new (rows); fallback (rows if whole, else 1)]: 0..rows-1 when the check is
        finite, else rows.. (whole) or rows (one fallback row)."""

        def make():
            base = arange(rows, dtype=f32, device=self.device)
            index = base + self.bad * float(rows) if whole else base * self.ok + self.bad * float(rows)
            return index.to(i32)
        return self._once(("index", rows, whole), make)

    def hyperparameters(self, hparams, skip):
        """`hparams`' values, or `skip` for a skipped step, as a tensor of this step's graph."""

        def make():
            values = tensor(hparams.values, device=self.device)
            hparams.uploaded(values._node)
            # hparams is kept with its selection: its id is not reused while this guard lives
            return hparams, self.select(values, tensor(np.asarray(skip, dtype=np.float32), device=self.device))
        return self._once(("hparams", id(hparams)), make)[1]


class _Pick(Primitive):
    """Rows of [new; fallback], both seen as rows of `width` elements, picked by the int32 `index`, in
    new's shape: the guard's selection, one recorded op (a step selects every gradient)."""

    @staticmethod
    def build(ctx, graph, new, fallback, index, width):
        return picked(graph, new, fallback, index, width)


def picked(graph, new, fallback, index, width):
    """The node of rows of [new; fallback] picked by `index` (_Pick), in new's shape."""
    stacked = ops.concat(graph.ctx, _as_rows(graph, new, width), _as_rows(graph, fallback, width), 1)
    picked = ops.get_rows(graph.ctx, stacked, index)
    return picked if list(picked.ne) == list(new.ne) else ops.reshape(graph.ctx, picked, new)


def _as_rows(graph, node, width):
    """The contiguous `node` as a 2-D [width, rows] node (itself when it has that shape)."""
    ne = [int(n) for n in node.ne]
    rows = ne[0] * ne[1] * ne[2] * ne[3] // width
    return node if ne == [width, rows, 1, 1] else ops.reshape_2d(graph.ctx, node, width, rows)


def _rows(shape):
    """(rows, width) of a non-empty contiguous `shape` seen as rows of its trailing dimensions: rows of its
    last dimension, wider where needed for few enough rows to index exactly in float32."""
    dims = [int(s) for s in shape] or [1]
    n = 1
    for s in dims:
        n *= s
    width, i = dims[-1], len(dims) - 2
    while n // width > _EXACT_ROWS and i >= 0:
        width *= dims[i]
        i -= 1
    return n // width, width
