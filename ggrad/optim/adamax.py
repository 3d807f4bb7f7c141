"""Adamax (Kingma & Ba): Adam with the infinity norm of past gradients in place of their RMS."""

from __future__ import annotations

from .. import ggml
from . import fused_updates
from ..autograd.factory import tensor, zeros_like
from ..autograd.ops import maximum
from .optimizer import ParamsT, Optimizer, check_adam_like, check_flags, l2_gradient


class Adamax(Optimizer):
    """Adamax, as PyTorch's `torch.optim.Adamax`.

    For each parameter p with gradient g, at step t:

        g <- g + weight_decay * p                     (after negating g when maximizing)
        m <- beta1 * m + (1 - beta1) * g
        u <- max(beta2 * u, |g| + eps)
        p <- p - lr / (1 - beta1^t) * m / u

    Args:
        params: iterable of Tensors or of parameter-group dicts.
        lr (float): learning rate. Default: 2e-3.
        betas (tuple[float, float]): decay of the first moment and of the norm. Default: (0.9, 0.999).
        eps (float): added to the norm. Default: 1e-8.
        weight_decay (float): L2 penalty coefficient. Default: 0.
        foreach, capturable: PyTorch's implementation switches, accepted (`check_flags`).
        maximize (bool): maximize the objective instead of minimizing it. Default: False.
    """

    skips_in_graph = True

    def __init__(self, params: ParamsT, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, foreach: bool | None = None, *,
                 maximize: bool = False, capturable: bool = False) -> None:
        check_flags(foreach, None, capturable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      maximize=maximize))

    def _check_group(self, group):
        check_adam_like(group)

    def _update_group(self, group):
        params = self._stepped(group, lambda p: {"exp_avg": zeros_like(p, dtype=ggml.f32),
                                                 "exp_inf": zeros_like(p, dtype=ggml.f32)})
        beta1, beta2 = group["betas"]
        for p in params:
            state = self.state[p]
            p32, g = l2_gradient(p, p.grad, group["weight_decay"], group["maximize"])
            exp_avg = state["exp_avg"] * beta1 + g * (1.0 - beta1)
            exp_inf = maximum(state["exp_inf"] * beta2, g.abs() + group["eps"])
            fused_updates.assign_(state["exp_avg"], exp_avg)
            fused_updates.assign_(state["exp_inf"], exp_inf)
            rate = tensor(group["lr"] / (1.0 - beta1 ** state["step"]), device=p.device)   # data: changes per step
            fused_updates.assign_(p, p32 - exp_avg / exp_inf * rate)
        return params
