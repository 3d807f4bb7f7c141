"""Rprop (Riedmiller & Braun): per-coordinate step sizes grown while the gradient keeps its sign."""

from __future__ import annotations

from .. import ggml
from . import fused_updates
from ..autograd.factory import full_like, zeros_like
from ..autograd.ops import clamp, where
from .optimizer import ParamsT, Optimizer, check_flags, check_non_negative


class Rprop(Optimizer):
    """Rprop, as PyTorch's `torch.optim.Rprop` (its variant: no weight backtracking).

    For each coordinate with gradient g (negated when maximizing) and the previous step's gradient g':

        s <- clamp(s * etaplus, *step_sizes)    where g * g' > 0
        s <- clamp(s * etaminus, *step_sizes),  g <- 0   where g * g' < 0
        p <- p - sign(g) * s;  g' <- g

    Args:
        params: iterable of Tensors or of parameter-group dicts.
        lr (float): the initial step size. Default: 1e-2.
        etas (tuple[float, float]): (etaminus, etaplus), 0 < etaminus < 1 < etaplus. Default: (0.5, 1.2).
        step_sizes (tuple[float, float]): the least and the largest step size. Default: (1e-6, 50).
        capturable, foreach: PyTorch's implementation switches, accepted (`check_flags`).
        maximize (bool): maximize the objective instead of minimizing it. Default: False.
    """

    skips_in_graph = True

    def __init__(self, params: ParamsT, lr: float = 1e-2, etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False) -> None:
        check_flags(foreach, None, capturable)
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), maximize=maximize))

    def _check_group(self, group):
        check_non_negative(group, ("lr",))
        etaminus, etaplus = group["etas"]
        if not 0.0 < etaminus < 1.0 < etaplus:
            raise ValueError(f"Invalid eta values: {etaminus}, {etaplus}")

    def _update_group(self, group):
        params = self._stepped(group, lambda p: {"prev": zeros_like(p, dtype=ggml.f32),
                                                 "step_size": full_like(p, group["lr"], dtype=ggml.f32)})
        (etaminus, etaplus), (least, largest) = group["etas"], group["step_sizes"]
        for p in params:
            state = self.state[p]
            g = p.grad.to(ggml.f32)
            if group["maximize"]:
                g = -g
            agreement = g * state["prev"]
            factor = where(agreement > 0, etaplus, where(agreement < 0, etaminus, 1.0))
            step_size = clamp(state["step_size"] * factor, least, largest)
            g = where(agreement < 0, 0.0, g)
            fused_updates.assign_(state["step_size"], step_size)
            fused_updates.assign_(state["prev"], g)
            fused_updates.assign_(p, p.detach().to(ggml.f32) - g.sign() * step_size)
        return params
