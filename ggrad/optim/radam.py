"""RAdam (Liu et al.): Adam whose adaptive step is rectified while the second moment's variance is high."""

from __future__ import annotations

import math

from .. import ggml
from . import fused_updates
from ..autograd.factory import tensor, zeros_like
from .optimizer import ParamsT, Optimizer, check_adam_like, check_flags, decayed_gradient


class RAdam(Optimizer):
    """RAdam, as PyTorch's `torch.optim.RAdam`.

    For each parameter p with gradient g, at step t (rho_inf = 2 / (1 - beta2) - 1,
    rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)):

        p <- p * (1 - lr * weight_decay)               (decoupled_weight_decay)
        g <- g + weight_decay * p                      (otherwise; after negating g when maximizing)
        m <- beta1 * m + (1 - beta1) * g;  v <- beta2 * v + (1 - beta2) * g^2
        p <- p - lr * m / (1 - beta1^t) * r_t * sqrt(1 - beta2^t) / (sqrt(v) + eps)     (rho_t > 5)
        p <- p - lr * m / (1 - beta1^t)                                                   (otherwise)

    with r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t)).

    Args:
        params: iterable of Tensors or of parameter-group dicts.
        lr (float): learning rate. Default: 1e-3.
        betas (tuple[float, float]): decay rates of the moments. Default: (0.9, 0.999).
        eps (float): added to the denominator. Default: 1e-8.
        weight_decay (float): weight decay coefficient. Default: 0.
        decoupled_weight_decay (bool): decay the weights as AdamW. Default: False.
        foreach, capturable: PyTorch's implementation switches, accepted (`check_flags`).
        maximize (bool): maximize the objective instead of minimizing it. Default: False.
    """

    skips_in_graph = True

    def __init__(self, params: ParamsT, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False) -> None:
        check_flags(foreach, None, capturable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay, maximize=maximize))

    def _check_group(self, group):
        check_adam_like(group)

    def _update_group(self, group):
        params = self._stepped(group, lambda p: {"exp_avg": zeros_like(p, dtype=ggml.f32),
                                                 "exp_avg_sq": zeros_like(p, dtype=ggml.f32)})
        lr, (beta1, beta2) = group["lr"], group["betas"]
        rho_inf = 2.0 / (1.0 - beta2) - 1.0
        for p in params:
            state = self.state[p]
            t = state["step"]
            p32, g = decayed_gradient(p, group)
            exp_avg = state["exp_avg"] * beta1 + g * (1.0 - beta1)
            exp_avg_sq = state["exp_avg_sq"] * beta2 + (g * g) * (1.0 - beta2)
            fused_updates.assign_(state["exp_avg"], exp_avg)
            fused_updates.assign_(state["exp_avg_sq"], exp_avg_sq)
            bc1, bc2 = 1.0 - beta1 ** t, 1.0 - beta2 ** t
            rho_t = rho_inf - 2.0 * t * beta2 ** t / bc2
            if rho_t > 5.0:
                rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                step = exp_avg / (exp_avg_sq.sqrt() + group["eps"]) * tensor(
                    lr / bc1 * rect * math.sqrt(bc2), device=p.device)
            else:
                step = exp_avg * tensor(lr / bc1, device=p.device)
            fused_updates.assign_(p, p32 - step)
        return params
