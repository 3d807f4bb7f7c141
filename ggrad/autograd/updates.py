"""Fused in-place parameter updates for optimizers: GGML's opt_step_adamw and opt_step_sgd.

They overwrite a parameter (and its moments) in its own memory when the step's graph is computed,
after everything else pending on the device has read the old values. Hyper-parameters travel as a
small f32 tensor, so changing the learning rate never changes the graph.
"""

import contextlib

import numpy as np

from .. import ggml
from ..ggml import ops
from ..ggml.errors import DeviceError, DTypeError, ShapeError
from . import execution
from .pending import graph_of


_ADAMW, _SGD, _ASSIGN = ("opt_step_adamw",), ("opt_step_sgd",), ("assign",)   # graph-cache event keys


def _as_leaf(param):
    """GGML updates only leaf tensors in place: compute a parameter whose value is still a pending op."""
    if param._pending is not None and not param._node.is_leaf:
        param.realize()


def _check(param, others, op):
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
    _check(param, {"grad": grad, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}, "adamw_")
    for t in (param, exp_avg, exp_avg_sq):
        _as_leaf(t)
    grad = grad.to(ggml.f32)
    with execution.lock_of(param.device):
        graph = graph_of(param, grad, exp_avg, exp_avg_sq)
        target = graph.node(param)
        target.set_param()   # GGML's optimizer ops only update tensors flagged as parameters
        nodes = (target, graph.contiguous(grad), graph.node(exp_avg), graph.node(exp_avg_sq), hparams.node(graph))
        graph.effect(graph.event(_ADAMW, nodes, lambda: ops.opt_step_adamw(graph.ctx, *nodes)))


def sgd_(param, grad, hparams):
    """Schedule one SGD step `param -= lr * (grad + wd * param)`; `hparams` = [lr, weight_decay]."""
    _check(param, {"grad": grad}, "sgd_")
    _as_leaf(param)
    grad = grad.to(ggml.f32)
    with execution.lock_of(param.device):
        graph = graph_of(param, grad)
        target = graph.node(param)
        target.set_param()
        nodes = (target, graph.contiguous(grad), hparams.node(graph))
        graph.effect(graph.event(_SGD, nodes, lambda: ops.opt_step_sgd(graph.ctx, *nodes)))


def assign_(target, value):
    """Schedule writing `value` into `target`'s own memory (in-place state updates such as momentum)."""
    if value.shape != target.shape:
        raise ShapeError(f"assign_: value of shape {value.shape} for a target of shape {target.shape}")
    _as_leaf(target)
    value = value.to(target.dtype)
    with execution.lock_of(target.device):
        graph = graph_of(target, value)
        nodes = (graph.contiguous(value), graph.node(target))
        graph.effect(graph.event(_ASSIGN, nodes, lambda: ops.cpy(graph.ctx, *nodes)))


@contextlib.contextmanager
def all_or_nothing():
    """Updates scheduled inside the block are dropped again if it ends in an exception (Ctrl-C included):
    a half-scheduled optimizer step never reaches a later compute."""
    marks = {name: (rt.graph, len(rt.graph.effects)) for name, rt in list(execution._runtimes.items())}
    try:
        yield
    except BaseException:
        for name, rt in list(execution._runtimes.items()):
            graph, count = marks.get(name, (None, 0))
            # a graph made during the block (after a compute inside it) holds only the block's updates
            del rt.graph.effects[count if rt.graph is graph else 0:]
        raise
