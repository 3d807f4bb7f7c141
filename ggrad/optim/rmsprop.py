"""RMSprop (Hinton's lecture 6e; PyTorch's variant with centering and momentum): `RMSprop`, `rmsprop`."""

from __future__ import annotations

from .. import ggml
from . import fused_updates
from ..autograd.factory import tensor, zeros_like
from .optimizer import ParamsT, Optimizer, check_flags, check_non_negative, l2_gradient


class RMSprop(Optimizer):
    """RMSprop, as PyTorch's `torch.optim.RMSprop`.

    For each parameter p with gradient g:

        g <- g + weight_decay * p
        v <- alpha * v + (1 - alpha) * g^2
        d <- sqrt(v - m^2) + eps, with m <- alpha * m + (1 - alpha) * g      (centered)
             sqrt(v) + eps                                                    (otherwise)
        b <- momentum * b + g / d; p <- p - lr * b                            (momentum > 0)
        p <- p - lr * g / d                                                   (otherwise)

    Composed from tensor ops in float32; the state is float32 and written into its own memory.

    Args:
        params: iterable of Tensors or of parameter-group dicts.
        lr (float): learning rate. Default: 1e-2.
        alpha (float): smoothing constant of the squared-gradient average. Default: 0.99.
        eps (float): added to the denominator. Default: 1e-8.
        weight_decay (float): L2 penalty coefficient. Default: 0.
        momentum (float): momentum factor. Default: 0.
        centered (bool): normalize by the gradient's estimated variance. Default: False.
        maximize (bool): maximize the objective instead of minimizing it. Default: False.
    """

    skips_in_graph = True

    def __init__(self, params: ParamsT, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 capturable: bool = False, foreach: bool | None = None, maximize: bool = False) -> None:
        check_flags(foreach, None, capturable)
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                        centered=centered, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group):
        check_non_negative(group, ("lr", "eps", "momentum", "weight_decay", "alpha"))

    def _update_group(self, group):
        def new_state(p):
            state = {"square_avg": zeros_like(p, dtype=ggml.f32)}
            if group["momentum"] > 0:
                state["momentum_buffer"] = zeros_like(p, dtype=ggml.f32)
            if group["centered"]:
                state["grad_avg"] = zeros_like(p, dtype=ggml.f32)
            return state
        params = self._stepped(group, new_state)
        rmsprop(params, [p.grad for p in params], [self.state[p] for p in params], lr=group["lr"],
                alpha=group["alpha"], eps=group["eps"], weight_decay=group["weight_decay"],
                momentum=group["momentum"], centered=group["centered"], maximize=group["maximize"])
        return params


def rmsprop(params, grads, states, *, lr, alpha, eps, weight_decay, momentum, centered, maximize=False):
    """Schedule one RMSprop update of each parameter; `states[i]` holds its float32 buffers by PyTorch's names."""
    rates = {}   # device -> lr as a 0-d tensor: data, not a constant of the graph (it may change every step)
    for p, grad, state in zip(params, grads, states):
        p32, g = l2_gradient(p, grad, weight_decay, maximize)
        rate = rates.setdefault(p.device.name, tensor(float(lr), device=p.device))
        square_avg = state["square_avg"] * alpha + (g * g) * (1.0 - alpha)
        fused_updates.assign_(state["square_avg"], square_avg)
        if centered:
            grad_avg = state["grad_avg"] * alpha + g * (1.0 - alpha)
            fused_updates.assign_(state["grad_avg"], grad_avg)
            denom = (square_avg - grad_avg * grad_avg).sqrt() + eps
        else:
            denom = square_avg.sqrt() + eps
        if momentum > 0:
            buf = state["momentum_buffer"] * momentum + g / denom
            fused_updates.assign_(state["momentum_buffer"], buf)
            fused_updates.assign_(p, p32 - buf * rate)
        else:
            fused_updates.assign_(p, p32 - (g / denom) * rate)
