"""ASGD (Polyak & Juditsky): SGD with a decaying step and a running average of the iterates (`ax`)."""

from __future__ import annotations

from .. import ggml
from . import fused_updates
from ..autograd.factory import tensor, zeros_like
from .optimizer import ParamsT, Optimizer, check_flags, check_non_negative, l2_gradient


class ASGD(Optimizer):
    """Averaged SGD, as PyTorch's `torch.optim.ASGD`.

    For each parameter p with gradient g, at step t (eta and mu start at lr and 1):

        g <- g + weight_decay * p                     (after negating g when maximizing)
        p <- p * (1 - lambd * eta) - eta * g
        ax <- ax + mu * (p - ax)                      (ax <- p while mu is 1)
        eta <- lr / (1 + lambd * lr * t)^alpha;  mu <- 1 / max(1, t - t0)

    Args:
        params: iterable of Tensors or of parameter-group dicts.
        lr (float): learning rate. Default: 1e-2.
        lambd (float): decay term. Default: 1e-4.
        alpha (float): power of the eta update. Default: 0.75.
        t0 (float): the step at which averaging starts. Default: 1e6.
        weight_decay (float): L2 penalty coefficient. Default: 0.
        foreach, capturable: PyTorch's implementation switches, accepted (`check_flags`).
        maximize (bool): maximize the objective instead of minimizing it. Default: False.
    """

    skips_in_graph = True

    def __init__(self, params: ParamsT, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0.0, foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False) -> None:
        check_flags(foreach, None, capturable)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      maximize=maximize))

    def _check_group(self, group):
        check_non_negative(group, ("lr", "weight_decay"))

    def _update_group(self, group):
        params = self._stepped(group, lambda p: {"eta": float(group["lr"]), "mu": 1.0,
                                                 "ax": zeros_like(p, dtype=ggml.f32)})
        lr, lambd = group["lr"], group["lambd"]
        for p in params:
            state = self.state[p]
            p32, g = l2_gradient(p, p.grad, group["weight_decay"], group["maximize"])
            eta = state["eta"]
            new_p = p32 * tensor(1.0 - lambd * eta, device=p.device) - g * tensor(eta, device=p.device)
            fused_updates.assign_(p, new_p)
            if state["mu"] != 1:
                fused_updates.assign_(state["ax"], state["ax"] + (new_p - state["ax"]) * tensor(state["mu"], device=p.device))
            else:
                fused_updates.assign_(state["ax"], new_p * 1.0)
            t = state["step"]
            state["eta"] = lr / (1.0 + lambd * lr * t) ** group["alpha"]
            state["mu"] = 1.0 / max(1.0, t - group["t0"])
        return params
