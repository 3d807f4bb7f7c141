"""Fused in-place parameter updates for the optimizers: GGML's opt_step_adamw and opt_step_sgd (or ggrad's AdamW
kernel, as the lowering says) and plain writes of optimizer state.

They overwrite a parameter (and its moments) in its own memory when the step's graph is computed, after
everything else pending on the device has read the old values. Hyper-parameters travel as a small f32 tensor,
so changing the learning rate never changes the graph. Inside `update_guards.skipped_if_nan` (a GradScaler's
step) each update takes effect only where the check allows it.
"""

import contextlib

import numpy as np

from .. import ggml
from ..autograd import device_locks, memory, replay_notes, update_guards
from ..autograd.lowering import choice, names
from ..autograd.memory import graph_of
from ..autograd.tensor import Tensor
from ..ggml import kernels, ops
from ..ggml.errors import DeviceError, DTypeError, ShapeError

_ADAMW, _SGD, _ASSIGN = ("opt_step_adamw",), ("opt_step_sgd",), ("assign",)   # graph-cache event keys
_ADAMW_KERNEL = ("adamw_f32",)
# opt_step_adamw's parameters [lr, beta1, beta2, eps, wd, 1/(1-beta1^t), 1/(1-beta2^t)] and opt_step_sgd's
# [lr, wd] that leave parameter and moments unchanged (with the gradient replaced as adamw_/sgd_ do)
_ADAMW_SKIP = (0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0)
_SGD_SKIP = (0.0, 0.0)


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
    (shared by every parameter of a group within that step). `uploads` lists the nodes its values were
    uploaded into (a replayed step writes the next step's values there: optimizer.py)."""

    def __init__(self, values, device):
        self.values = np.asarray(values, dtype=np.float32)
        self.device = ggml.device(device)
        self._graph = self._node = None
        self.uploads = []

    def node(self, graph):
        if self._graph is not graph:
            self._node = graph.new_leaf(ggml.f32, (self.values.size,))
            graph.upload(self._node, self.values)
            self._graph = graph
            self.uploads.append(self._node)
        return self._node

    def uploaded(self, node):
        """Note that `node` (a leaf of a step's graph) holds these values too (a guard's copy)."""
        self.uploads.append(node)


def hyperparameters(values, device):
    """Hyper-parameters for `adamw_` / `sgd_` (see Hyperparameters); noted for a step being recorded by
    `compile_step`, whose optimizer writes each replayed step's values into them."""
    hparams = Hyperparameters(values, device)
    if replay_notes.active() is not None:
        replay_notes.note(MadeHyperparameters(hparams))
    return hparams


class MadeHyperparameters(replay_notes.Action):
    """Hyperparameters made while a step records: the optimizer's step takes them (optimizer.py)."""

    def __init__(self, hparams):
        self.hparams = hparams


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
        guard = update_guards.guard_of(device)
        pick = check = None
        if guard is not None and _update_reads_check(memory.pending_graph(device)):
            check = guard.check
        elif guard is not None:
            # a skipped step: m*1 + (-0)*0 == m and v*1 + (+0)*0 == v bitwise; with lr 0 and eps 1 the parameter
            # becomes p*1 - (0*m)/(sqrt(v)+1) == p (a parameter equal to -0.0 with m < 0 reads +0.0)
            pick = guard.choice(grad, -0.0) if grad.numel() else None
            hparams = guard.hyperparameters(hparams, _ADAMW_SKIP)
        per_device.setdefault(param.device, []).append((param, grad, exp_avg, exp_avg_sq, hparams, pick, check))
    for device, group in per_device.items():
        with device_locks.lock_of(device):
            graph = graph_of(*[t for step in group for t in step[:4]])
            items = []
            for param, grad, exp_avg, exp_avg_sq, hparams, pick, check in group:
                target = graph.target(param)
                target.set_param()   # GGML's optimizer ops only update tensors flagged as parameters
                items.append(((target, graph.contiguous(grad), graph.target(exp_avg), graph.target(exp_avg_sq),
                               _hparams_node(graph, hparams)), pick, check))
            _adamw_updates(graph, items)


def sgd_(param, grad, hparams):
    """Schedule one SGD step `param -= lr * (grad + wd * param)`; `hparams` = [lr, weight_decay]."""
    _check(param, {"grad": grad}, "sgd_")
    _as_leaf(param)
    grad = grad if grad.dtype is ggml.f32 else grad.to(ggml.f32)
    guard = update_guards.guard_of(param.device)
    pick = None
    if guard is not None:
        pick = guard.choice(grad, 0.0) if grad.numel() else None   # skipped: p * (1 - 0*0) - 0 * (+0) == p bitwise
        hparams = guard.hyperparameters(hparams, _SGD_SKIP)
    with device_locks.lock_of(param.device):
        graph = graph_of(param, grad)
        target = graph.target(param)
        target.set_param()
        _updates(graph, _SGD, [((target, graph.contiguous(grad), _hparams_node(graph, hparams)), pick, None)],
                 ops.opt_step_sgd)


@choice("adamw")
def _adamw_updates(graph, items):
    """AdamW's updates of `items` by GGML's opt_step_adamw, or by ggrad's kernel where the lowering says so."""
    _updates(graph, _ADAMW, items, ops.opt_step_adamw)


@_adamw_updates.alternative("kernel")
def _adamw_updates_by_kernel(graph, items):
    _updates(graph, _ADAMW_KERNEL, items, kernels.adamw_f32)


# whether AdamW's update reads a GradScaler's check itself (ggrad's kernel skips where it is nan), so that
# neither the gradient nor the hyper-parameters are selected first (GGML's op: update_guards)
_update_reads_check = names("adamw", "kernel")


def _updates(graph, key, items, update):
    """The in-place updates `update(ctx, param, grad, *rest)` of `items`, each (nodes, pick, check), as one
    event of the graph. With a guard's `pick` (fallback row, index, width) an item's gradient is selected
    inside the event (no recorded op a parameter for the selection); a guard's `check` goes to the update
    as its last operand."""
    operands, layout = [], []
    for nodes, pick, check in items:
        operands.extend(nodes)
        if pick is not None:
            operands.extend((graph.node(pick[0]), graph.node(pick[1])))
        if check is not None:
            operands.append(graph.node(check))
        layout.append((None if pick is None else pick[2], check is not None))

    def build():
        node, at = None, 0
        for (nodes, pick, check), (width, checked) in zip(items, layout):
            target, grad, *rest = operands[at:at + len(nodes)]
            at += len(nodes)
            if pick is not None:
                grad = update_guards.picked(graph, grad, operands[at], operands[at + 1], width)
                at += 2
            if checked:
                rest.append(operands[at])
                at += 1
            node = update(graph.ctx, target, grad, *rest)
            graph.update_in_place(node)
        return node
    graph.event(key + (tuple(layout),), operands, build)


def _hparams_node(graph, hparams):
    """The node of Hyperparameters, or of the tensor a guard selected them into."""
    return graph.node(hparams) if isinstance(hparams, Tensor) else hparams.node(graph)


def assign_(target, value):
    """Schedule writing `value` into `target`'s own memory (in-place state updates such as momentum)."""
    if value.shape != target.shape:
        raise ShapeError(f"assign_: value of shape {value.shape} for a target of shape {target.shape}")
    _as_leaf(target)
    guard = update_guards.guard_of(target.device)
    if guard is not None:   # skipped: the target's own value is written back
        value = guard.select(value.to(ggml.f32), target.detach().to(ggml.f32))
    value = value.to(target.dtype)
    with device_locks.lock_of(target.device):
        graph = graph_of(target, value)
        nodes = (graph.contiguous(value), graph.target(target))
        graph.update_in_place(graph.event(_ASSIGN, nodes, lambda: ops.cpy(graph.ctx, *nodes)))


@contextlib.contextmanager
def all_or_nothing():
    """Updates scheduled inside the block are dropped again if it ends in an exception (Ctrl-C included):
    a half-scheduled optimizer step never reaches a later compute."""
    marks = {name: (rt.graph, len(rt.graph.in_place_updates)) for name, rt in list(memory.runtimes_by_name())}
    try:
        yield
    except BaseException:
        for name, rt in list(memory.runtimes_by_name()):
            graph, count = marks.get(name, (None, 0))
            # a graph made during the block (after a compute inside it) holds only the block's updates
            rt.graph.drop_updates_after(count if rt.graph is graph else 0)
        raise
