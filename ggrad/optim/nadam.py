"""NAdam (Dozat): Adam with Nesterov momentum, the momentum warming up by `momentum_decay`."""

from __future__ import annotations

from .. import ggml
from . import fused_updates
from ..autograd.factory import tensor, zeros_like
from .optimizer import ParamsT, Optimizer, check_adam_like, check_flags, decayed_gradient


class NAdam(Optimizer):
    """NAdam, as PyTorch's `torch.optim.NAdam`.

    For each parameter p with gradient g, at step t (mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay)),
    P_t = mu_1 * ... * mu_t):

        p <- p * (1 - lr * weight_decay)               (decoupled_weight_decay)
        g <- g + weight_decay * p                      (otherwise; after negating g when maximizing)
        m <- beta1 * m + (1 - beta1) * g;  v <- beta2 * v + (1 - beta2) * g^2
        d <- sqrt(v / (1 - beta2^t)) + eps
        p <- p - lr * (1 - mu_t) / (1 - P_t) * g / d - lr * mu_{t+1} / (1 - P_t * mu_{t+1}) * m / d

    Args:
        params: iterable of Tensors or of parameter-group dicts.
        lr (float): learning rate. Default: 2e-3.
        betas (tuple[float, float]): decay rates of the moments. Default: (0.9, 0.999).
        eps (float): added to the denominator. Default: 1e-8.
        weight_decay (float): weight decay coefficient. Default: 0.
        momentum_decay (float): the momentum's warm-up rate. Default: 4e-3.
        decoupled_weight_decay (bool): decay the weights as AdamW (NAdamW). Default: False.
        foreach, capturable: PyTorch's implementation switches, accepted (`check_flags`).
        maximize (bool): maximize the objective instead of minimizing it. Default: False.
    """

    skips_in_graph = True

    def __init__(self, params: ParamsT, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False) -> None:
        check_flags(foreach, None, capturable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize))

    def _check_group(self, group):
        check_adam_like(group, ("momentum_decay",))

    def _update_group(self, group):
        params = self._stepped(group, lambda p: {"mu_product": 1.0, "exp_avg": zeros_like(p, dtype=ggml.f32),
                                                 "exp_avg_sq": zeros_like(p, dtype=ggml.f32)})
        lr, (beta1, beta2) = group["lr"], group["betas"]
        for p in params:
            state = self.state[p]
            t = state["step"]
            p32, g = decayed_gradient(p, group)
            mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * group["momentum_decay"]))
            mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * group["momentum_decay"]))
            state["mu_product"] *= mu
            exp_avg = state["exp_avg"] * beta1 + g * (1.0 - beta1)
            exp_avg_sq = state["exp_avg_sq"] * beta2 + (g * g) * (1.0 - beta2)
            fused_updates.assign_(state["exp_avg"], exp_avg)
            fused_updates.assign_(state["exp_avg_sq"], exp_avg_sq)
            denom = (exp_avg_sq * tensor(1.0 / (1.0 - beta2 ** t), device=p.device)).sqrt() + group["eps"]
            grad_rate = tensor(lr * (1.0 - mu) / (1.0 - state["mu_product"]), device=p.device)
            avg_rate = tensor(lr * mu_next / (1.0 - state["mu_product"] * mu_next), device=p.device)
            fused_updates.assign_(p, p32 - g / denom * grad_rate - exp_avg / denom * avg_rate)
        return params
