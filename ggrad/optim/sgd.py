"""Stochastic gradient descent (with momentum, Nesterov momentum, weight decay): `SGD` and the pure `sgd`."""

from __future__ import annotations

from .. import ggml
from . import fused_updates
from .optimizer import ParamsT, Optimizer, check_flags, check_non_negative


class SGD(Optimizer):
    """Stochastic gradient descent, optionally with (Nesterov) momentum, as in PyTorch.

    For each parameter p with gradient g:

        g <- g + weight_decay * p
        b <- g (first step), else b <- momentum * b + (1 - dampening) * g       (momentum > 0)
        g <- g + momentum * b (nesterov), else g <- b                          (momentum > 0)
        p <- p - lr * g

    Plain SGD of float32 parameters is GGML's fused `opt_step_sgd`; momentum buffers are updated by
    composed tensor ops written into their own memory; float16/bfloat16 parameters are computed in
    float32 and cast back (their momentum buffers are float32).

    Args:
        params: iterable of Tensors or of parameter-group dicts.
        lr (float): learning rate. Default: 1e-3.
        momentum (float): momentum factor. Default: 0.
        dampening (float): dampening of the momentum. Default: 0.
        nesterov (bool): Nesterov momentum. Default: False.
        weight_decay (float): L2 penalty coefficient. Default: 0.
        maximize (bool): maximize the objective instead of minimizing it. Default: False.
        foreach, fused: PyTorch's implementation switches, accepted (`check_flags`).
    """

    skips_in_graph = True

    def __init__(self, params: ParamsT, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, fused: bool | None = None) -> None:
        check_flags(foreach, fused)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, nesterov=nesterov,
                        weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group):
        check_non_negative(group, ("lr", "momentum", "weight_decay"))
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening "
                             f"(got momentum={group['momentum']}, dampening={group['dampening']})")

    def _update_group(self, group):
        params, grads, buffers = [], [], []
        for p in group["params"]:
            if p.grad is None:
                continue
            params.append(p)
            grads.append(p.grad)
            buffers.append(self.state[p].get("momentum_buffer") if group["momentum"] != 0 else None)
        sgd(params, grads, buffers, weight_decay=group["weight_decay"], momentum=group["momentum"],
            lr=group["lr"], dampening=group["dampening"], nesterov=group["nesterov"], maximize=group["maximize"])
        if group["momentum"] != 0:
            for p, buf in zip(params, buffers):
                self.state[p]["momentum_buffer"] = buf
        return params

    def _replay_hyperparameters(self, stepped):
        """The fused updates' hyper-parameters of a replayed step (compile_step) in the order `sgd` makes
        them ([lr, weight decay] per device; the decay is in the gradient with momentum); None where an
        update is composed of ops (half parameters), whose learning rate is a constant of the graph."""
        values = []
        for group, params in zip(self.param_groups, stepped):
            if any(p.dtype is not ggml.f32 for p in params):
                return None
            wd = group["weight_decay"] if group["momentum"] == 0 else 0.0
            values.extend([group["lr"], wd] for _ in dict.fromkeys(p.device.name for p in params))
        return values


def sgd(params, grads, momentum_buffers, *, weight_decay, momentum, lr, dampening, nesterov, maximize=False):
    """Schedule one SGD update of each parameter (in place, when the pending graph is computed).

    `momentum_buffers[i]` is None before a parameter's first step with momentum; this function then
    puts the new buffer in the list (as PyTorch's functional `sgd` does).
    """
    hparams = {}

    def fused(p, d, wd):
        key = (p.device.name, wd)
        if key not in hparams:
            hparams[key] = fused_updates.hyperparameters([lr, wd], p.device)
        fused_updates.sgd_(p, d, hparams[key])

    for i, p in enumerate(params):
        grad = -grads[i] if maximize else grads[i]
        if momentum == 0 and p.dtype is ggml.f32:
            fused(p, grad, weight_decay)  # p * (1 - lr wd) - lr g == p - lr (g + wd p)
            continue
        p32 = p if p.dtype is ggml.f32 else p.to(ggml.f32)
        d = grad if grad.dtype is ggml.f32 else grad.to(ggml.f32)
        if weight_decay != 0:
            d = d + p32 * weight_decay
        if momentum != 0:
            buf = momentum_buffers[i]
            if buf is None:
                buf = d.clone()
                momentum_buffers[i] = buf
            else:
                new = buf * momentum + d * (1.0 - dampening)
                fused_updates.assign_(buf, new)
                buf = new
            d = d + buf * momentum if nesterov else buf
        if p.dtype is ggml.f32:
            fused(p, d, 0.0)
        else:
            fused_updates.assign_(p, p32 - d * lr)
