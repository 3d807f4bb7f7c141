"""Adagrad (Duchi et al.): per-coordinate learning rates from the running sum of squared gradients."""

from __future__ import annotations

from .. import ggml
from . import fused_updates
from ..autograd.factory import full_like, tensor
from .optimizer import ParamsT, Optimizer, check_flags, check_non_negative, l2_gradient


class Adagrad(Optimizer):
    """Adagrad, as PyTorch's `torch.optim.Adagrad`.

    For each parameter p with gradient g, at step t:

        g <- g + weight_decay * p
        lr_t <- lr / (1 + (t - 1) * lr_decay)
        s <- s + g^2
        p <- p - lr_t * g / (sqrt(s) + eps)

    Composed from tensor ops in float32; the sum `s` starts at `initial_accumulator_value`.

    Args:
        params: iterable of Tensors or of parameter-group dicts.
        lr (float): learning rate. Default: 1e-2.
        lr_decay (float): learning-rate decay per step. Default: 0.
        weight_decay (float): L2 penalty coefficient. Default: 0.
        initial_accumulator_value (float): starting value of the sum of squares. Default: 0.
        eps (float): added to the denominator. Default: 1e-10.
        maximize (bool): maximize the objective instead of minimizing it. Default: False.
    """

    skips_in_graph = True

    def __init__(self, params: ParamsT, lr: float = 1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, fused: bool | None = None) -> None:
        check_flags(foreach, fused)
        defaults = dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, eps=eps, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group):
        check_non_negative(group, ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"))

    def _update_group(self, group):
        params = self._stepped(group, lambda p: {
            "sum": full_like(p, group["initial_accumulator_value"], dtype=ggml.f32)})
        adagrad(params, [p.grad for p in params], [self.state[p]["sum"] for p in params],
                [self.state[p]["step"] for p in params], lr=group["lr"], lr_decay=group["lr_decay"],
                weight_decay=group["weight_decay"], eps=group["eps"], maximize=group["maximize"])
        return params


def adagrad(params, grads, state_sums, state_steps, *, lr, lr_decay, weight_decay, eps, maximize=False):
    """Schedule one Adagrad update of each parameter (`state_steps[i]` is t after this step)."""
    for p, grad, state_sum, t in zip(params, grads, state_sums, state_steps):
        p32, g = l2_gradient(p, grad, weight_decay, maximize)
        total = state_sum + g * g
        fused_updates.assign_(state_sum, total)
        step_lr = tensor(lr / (1.0 + (t - 1) * lr_decay), device=p.device)   # data: it changes every step
        fused_updates.assign_(p, p32 - (g / (total.sqrt() + eps)) * step_lr)
