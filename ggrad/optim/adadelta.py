"""Adadelta (Zeiler): steps scaled by the ratio of running RMS of updates and of gradients."""

from __future__ import annotations

from .. import ggml
from . import fused_updates
from ..autograd.factory import tensor, zeros_like
from .optimizer import ParamsT, Optimizer, check_flags, check_non_negative, l2_gradient


class Adadelta(Optimizer):
    """Adadelta, as PyTorch's `torch.optim.Adadelta`.

    For each parameter p with gradient g:

        g <- g + weight_decay * p                     (after negating g when maximizing)
        v <- rho * v + (1 - rho) * g^2
        d <- sqrt(u + eps) / sqrt(v + eps) * g
        u <- rho * u + (1 - rho) * d^2
        p <- p - lr * d

    Args:
        params: iterable of Tensors or of parameter-group dicts.
        lr (float): scale of the step. Default: 1.0.
        rho (float): smoothing constant of both averages, in [0, 1]. Default: 0.9.
        eps (float): added inside the square roots. Default: 1e-6.
        weight_decay (float): L2 penalty coefficient. Default: 0.
        foreach, capturable: PyTorch's implementation switches, accepted (`check_flags`).
        maximize (bool): maximize the objective instead of minimizing it. Default: False.
    """

    skips_in_graph = True

    def __init__(self, params: ParamsT, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0, foreach: bool | None = None, *, capturable: bool = False,
                 maximize: bool = False) -> None:
        check_flags(foreach, None, capturable)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize))

    def _check_group(self, group):
        check_non_negative(group, ("lr",))
        if not 0.0 <= group["rho"] <= 1.0:
            raise ValueError(f"Invalid rho value: {group['rho']}")
        check_non_negative(group, ("eps", "weight_decay"))

    def _update_group(self, group):
        params = self._stepped(group, lambda p: {"square_avg": zeros_like(p, dtype=ggml.f32),
                                                 "acc_delta": zeros_like(p, dtype=ggml.f32)})
        for p in params:
            state = self.state[p]
            p32, g = l2_gradient(p, p.grad, group["weight_decay"], group["maximize"])
            rho, eps = group["rho"], group["eps"]
            square_avg = state["square_avg"] * rho + (g * g) * (1.0 - rho)
            delta = (state["acc_delta"] + eps).sqrt() / (square_avg + eps).sqrt() * g
            fused_updates.assign_(state["square_avg"], square_avg)
            fused_updates.assign_(state["acc_delta"], state["acc_delta"] * rho + (delta * delta) * (1.0 - rho))
            fused_updates.assign_(p, p32 - delta * tensor(float(group["lr"]), device=p.device))
        return params
