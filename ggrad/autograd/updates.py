"""Fused in-place parameter updates for optimizers: GGML's opt_step_adamw and opt_step_sgd.

They overwrite a parameter (and its moments) in its own memory when the step's graph is computed,
after everything else pending on the device has read the old values. Hyper-parameters travel as a
small f32 tensor, so changing the learning rate never changes the graph.

`skipped_if_nan(check)` makes the updates scheduled inside it conditional on a value of the same graph
(a GradScaler's inf/nan check), so that a step which may be skipped still computes as one graph.
"""

import contextlib
import contextvars

import numpy as np

from .. import ggml
from ..ggml import kernels, ops
from ..ggml.errors import DeviceError, DTypeError, ShapeError
from . import device_locks, memory
from .memory import graph_of
from .factory import arange, full, tensor
from .ops.unary import Step
from .primitive import Primitive
from .tensor import Tensor


_ADAMW, _SGD, _ASSIGN = ("opt_step_adamw",), ("opt_step_sgd",), ("assign",)   # graph-cache event keys
_ADAMW_KERNEL = ("adamw_f32",)


def _as_leaf(param):
    """GGML updates only leaf tensors in place: compute a parameter whose value is still a pending op."""
    if param._pending is not None and not param._node.is_leaf:
        param.realize()


def _check(param, others, op):
    """Raise for an operand of another shape or device than the parameter's, or a parameter not float32."""
    for name, t in others.items():
        if t.shape != param.shape:
            raise ShapeError(f"{op}: {name} of shape {t.shape} does not match the parameter's {param.shape}")
        if t.device != param.device:
            raise DeviceError(f"{op}: {name} is on {t.device.torch_name}, the parameter on {param.device.torch_name}")
    if param.dtype is not ggml.f32:
        raise DTypeError(f"{op}: the fused update needs float32 parameters, got {param.dtype.name}")


class Hyperparameters:
    """Optimizer hyper-parameters as a small f32 tensor, made in whichever step is pending when used
    (shared by every parameter of a group within that step)."""

    def __init__(self, values, device):
        self.values = np.asarray(values, dtype=np.float32)
        self.device = ggml.device(device)
        self._graph = self._node = None

    def node(self, graph):
        if self._graph is not graph:
            self._node = graph.new_leaf(ggml.f32, (self.values.size,))
            graph.upload(self._node, self.values)
            self._graph = graph
        return self._node


def hyperparameters(values, device):
    """Hyper-parameters for `adamw_` / `sgd_` (see Hyperparameters)."""
    return Hyperparameters(values, device)


def adamw_(param, grad, exp_avg, exp_avg_sq, hparams):
    """Schedule one AdamW step on `param`, `exp_avg`, `exp_avg_sq` (all updated in place).

    `hparams` comes from `hyperparameters([lr, beta1, beta2, eps, weight_decay, 1/(1-beta1^t),
    1/(1-beta2^t)])`.
    """
    adamw_all([(param, grad, exp_avg, exp_avg_sq, hparams)])


def adamw_all(steps):
    """Schedule the AdamW steps `steps`, each (param, grad, exp_avg, exp_avg_sq, hparams) as `adamw_` takes
    them; those of one device are one event of the graph cache (an event a parameter was most of an
    optimizer step's host time)."""
    per_device = {}
    for param, grad, exp_avg, exp_avg_sq, hparams in steps:
        shape, device = param.shape, param.device   # the common case checked inline; _check says what is wrong
        if not (param.dtype is ggml.f32 and grad.shape == shape and exp_avg.shape == shape
                and exp_avg_sq.shape == shape and grad.device is device and exp_avg.device is device
                and exp_avg_sq.device is device):
            _check(param, {"grad": grad, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}, "adamw_")
        for t in (param, exp_avg, exp_avg_sq):
            _as_leaf(t)
        grad = grad if grad.dtype is ggml.f32 else grad.to(ggml.f32)
        guard = _guard_of(device)
        pick = None
        if guard is not None:
            # a skipped step: m*1 + (-0)*0 == m and v*1 + (+0)*0 == v bitwise; with lr 0 and eps 1 the parameter
            # becomes p*1 - (0*m)/(sqrt(v)+1) == p (a parameter equal to -0.0 with m < 0 reads +0.0)
            pick = guard.choice(grad, -0.0) if grad.numel() else None
            hparams = guard.hyperparameters(hparams, _ADAMW_SKIP)
        per_device.setdefault(param.device, []).append((param, grad, exp_avg, exp_avg_sq, hparams, pick))
    for device, group in per_device.items():
        with device_locks.lock_of(device):
            graph = graph_of(*[t for step in group for t in step[:4]])
            items = []
            for param, grad, exp_avg, exp_avg_sq, hparams, pick in group:
                target = graph.target(param)
                target.set_param()   # GGML's optimizer ops only update tensors flagged as parameters
                items.append(((target, graph.contiguous(grad), graph.target(exp_avg), graph.target(exp_avg_sq),
                               _hparams_node(graph, hparams)), pick))
            kernel = graph.lowering.adamw == "kernel"
            _updates(graph, _ADAMW_KERNEL if kernel else _ADAMW, items,
                     kernels.adamw_f32 if kernel else ops.opt_step_adamw)


def sgd_(param, grad, hparams):
    """Schedule one SGD step `param -= lr * (grad + wd * param)`; `hparams` = [lr, weight_decay]."""
    _check(param, {"grad": grad}, "sgd_")
    _as_leaf(param)
    grad = grad if grad.dtype is ggml.f32 else grad.to(ggml.f32)
    guard = _guard_of(param.device)
    pick = None
    if guard is not None:
        pick = guard.choice(grad, 0.0) if grad.numel() else None   # skipped: p * (1 - 0*0) - 0 * (+0) == p bitwise
        hparams = guard.hyperparameters(hparams, _SGD_SKIP)
    with device_locks.lock_of(param.device):
        graph = graph_of(param, grad)
        target = graph.target(param)
        target.set_param()
        _updates(graph, _SGD, [((target, graph.contiguous(grad), _hparams_node(graph, hparams)), pick)],
                 ops.opt_step_sgd)


def _updates(graph, key, items, update):
    """The in-place updates `update(ctx, param, grad, *rest)` of `items`, each (nodes, pick), as one event of
    the graph. With a guard's `pick` (fallback row, index, width) an item's gradient is selected inside the
    event (no recorded op a parameter for the selection)."""
    operands, widths = [], []
    for nodes, pick in items:
        operands.extend(nodes)
        if pick is not None:
            operands.extend((graph.node(pick[0]), graph.node(pick[1])))
        widths.append(None if pick is None else pick[2])

    def build():
        node, at = None, 0
        for (nodes, pick), width in zip(items, widths):
            target, grad, *rest = operands[at:at + len(nodes)]
            at += len(nodes)
            if pick is not None:
                grad = _picked(graph, grad, operands[at], operands[at + 1], width)
                at += 2
            node = update(graph.ctx, target, grad, *rest)
            graph.effect(node)
        return node
    graph.event(key + (tuple(widths),), operands, build)


def _hparams_node(graph, hparams):
    """The node of Hyperparameters, or of the tensor a guard selected them into."""
    return graph.node(hparams) if isinstance(hparams, Tensor) else hparams.node(graph)


def assign_(target, value):
    """Schedule writing `value` into `target`'s own memory (in-place state updates such as momentum)."""
    if value.shape != target.shape:
        raise ShapeError(f"assign_: value of shape {value.shape} for a target of shape {target.shape}")
    _as_leaf(target)
    guard = _guard_of(target.device)
    if guard is not None:   # skipped: the target's own value is written back
        value = guard.select(value.to(ggml.f32), target.detach().to(ggml.f32))
    value = value.to(target.dtype)
    with device_locks.lock_of(target.device):
        graph = graph_of(target, value)
        nodes = (graph.contiguous(value), graph.target(target))
        graph.effect(graph.event(_ASSIGN, nodes, lambda: ops.cpy(graph.ctx, *nodes)))


@contextlib.contextmanager
def all_or_nothing():
    """Updates scheduled inside the block are dropped again if it ends in an exception (Ctrl-C included):
    a half-scheduled optimizer step never reaches a later compute."""
    marks = {name: (rt.graph, len(rt.graph.effects)) for name, rt in list(memory.runtimes_by_name())}
    try:
        yield
    except BaseException:
        for name, rt in list(memory.runtimes_by_name()):
            graph, count = marks.get(name, (None, 0))
            # a graph made during the block (after a compute inside it) holds only the block's updates
            del rt.graph.effects[count if rt.graph is graph else 0:]
        raise


# ---- updates conditional on a value of the graph ---------------------------------------------------------
# opt_step_adamw's parameters [lr, beta1, beta2, eps, wd, 1/(1-beta1^t), 1/(1-beta2^t)] and opt_step_sgd's
# [lr, wd] that leave parameter and moments unchanged (with the gradient replaced as adamw_/sgd_ do)
_ADAMW_SKIP = (0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0)
_SGD_SKIP = (0.0, 0.0)
_EXACT_ROWS = 1 << 22   # row indices up to 2 * this are exact in float32
_guards = contextvars.ContextVar("update_guards", default=None)


def _guard_of(device):
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
    taken never reaches the result (a product with a 0/1 flag would turn 0 * inf into nan)."""

    def __init__(self, check):
        self.device = check.device
        self.ok = Step.apply(check.detach() + 1.0)   # 1 when check is finite, 0 when nan (nan > 0 is false)
        self.bad = 1.0 - self.ok
        self._cache = {}

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
        event (`_updates`, `_picked`)."""
        rows, width = _rows(new.shape)
        row = self._once(("row", width, str(fallback)),
                         lambda: full((1, width), fallback, dtype=ggml.f32, device=self.device))
        return row, self._index(rows, whole=False), width

    def _index(self, rows, whole):
        """Row indices into [new (rows); fallback (rows if whole, else 1)]: 0..rows-1 when the check is
        finite, else rows.. (whole) or rows (one fallback row)."""

        def make():
            base = arange(rows, dtype=ggml.f32, device=self.device)
            index = base + self.bad * float(rows) if whole else base * self.ok + self.bad * float(rows)
            return index.to(ggml.i32)
        return self._once(("index", rows, whole), make)

    def hyperparameters(self, hparams, skip):
        """`hparams`' values, or `skip` for a skipped step, as a tensor of this step's graph."""

        def make():
            values = tensor(hparams.values, device=self.device)
            # hparams is kept with its selection: its id is not reused while this guard lives
            return hparams, self.select(values, tensor(np.asarray(skip, dtype=np.float32), device=self.device))
        return self._once(("hparams", id(hparams)), make)[1]


class _Pick(Primitive):
    """Rows of [new; fallback], both seen as rows of `width` elements, picked by the int32 `index`, in
    new's shape: the guard's selection, one recorded op (a step selects every gradient)."""

    @staticmethod
    def build(ctx, graph, new, fallback, index, width):
        return _picked(graph, new, fallback, index, width)


def _picked(graph, new, fallback, index, width):
    """The node of rows of [new; fallback] picked by `index` (_Pick), in new's shape."""
    stacked = ops.concat(graph.ctx, _as_rows(graph, new, width), _as_rows(graph, fallback, width), 1)
    picked = ops.get_rows(graph.ctx, stacked, index)
    return picked if list(picked.ne) == list(new.ne) else ops.reshape(graph.ctx, picked, new)


class NonFinite(Primitive):
    """sum(x * 0) over every element of the f32 tensors `xs`: nan exactly when one of them holds an inf or
    a nan, else 0. A GradScaler's check of all its gradients on a device as one recorded op. Each gradient's
    rows times a column of zeros is one matrix-vector product, a single read of it (each row's sum of x * 0
    in a vector kernel; a SUM over a whole gradient is a single slow workgroup on Vulkan, 48 ms a big-GPT
    step on the H200, and x * 0 written out first would be a pass more)."""

    @staticmethod
    def build(ctx, graph, *xs):
        total = None
        for x in xs:   # contiguous (Primitive's inputs)
            width = x.ne[0]
            rows = ops.reshape_2d(graph.ctx, x, width, x.nelements // width)
            part = ops.sum(graph.ctx, ops.mul_mat(graph.ctx, rows, graph.zeros(width)))
            total = part if total is None else ops.add(graph.ctx, total, part)
        return total

    @staticmethod
    def shape(*xs):
        return ()


class Scaled(Primitive):
    """The tensors `xs` times the 0-d `factor`, as one recorded op of several results: a GradScaler unscales
    all its gradients on a device so (an op a gradient before)."""
    several = True

    @staticmethod
    def build(ctx, graph, factor, *xs):
        return tuple(ops.mul(graph.ctx, x, factor) for x in xs)

    @staticmethod
    def shape(factor, *xs):
        return tuple(x.shape for x in xs)

    @staticmethod
    def result_dtype(factor, *xs):
        return tuple(x.dtype for x in xs)


def scaled(xs, factor):
    """The f32 tensors `xs` (with elements, on one device) times the 0-d f32 `factor` (see Scaled)."""
    for x in (factor,) + tuple(xs):
        if x.dtype is not ggml.f32:
            raise DTypeError(f"scaled: expected float32 tensors, got {x.dtype.name}")
    return Scaled.apply(factor, *xs)


def nonfinite(xs):
    """The 0-d f32 sum(x * 0) over the f32 tensors `xs` (with elements, on one device; see NonFinite)."""
    for x in xs:
        if x.dtype is not ggml.f32:
            raise DTypeError(f"nonfinite: expected float32 tensors, got {x.dtype.name}")
    return NonFinite.apply(*xs)


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
