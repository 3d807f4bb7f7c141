"""AdamW (Loshchilov & Hutter): Adam with decoupled weight decay, as PyTorch's (a subclass of Adam)."""

from __future__ import annotations

from .adam import Adam
from .optimizer import ParamsT


class AdamW(Adam):
    """Adam with decoupled weight decay, as PyTorch's `torch.optim.AdamW`.

    For each parameter p with gradient g, at step t:

        p <- p * (1 - lr * weight_decay)
        m <- beta1 * m + (1 - beta1) * g
        v <- beta2 * v + (1 - beta2) * g^2
        v_max <- max(v_max, v)                           (amsgrad only; v_max replaces v below)
        p <- p - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)

    float32 parameters without amsgrad use GGML's fused `opt_step_adamw`; amsgrad and float16/bfloat16
    parameters are composed from tensor ops (computed in float32, the moments kept in float32).

    Args:
        params: iterable of Tensors or of parameter-group dicts.
        lr (float): learning rate. Default: 1e-3.
        betas (tuple[float, float]): decay rates of the first and second moments. Default: (0.9, 0.999).
        eps (float): added to the denominator. Default: 1e-8.
        weight_decay (float): decoupled weight decay coefficient. Default: 1e-2.
        amsgrad (bool): use the running maximum of the second moment. Default: False.
        maximize (bool): maximize the objective instead of minimizing it. Default: False.
    """

    decoupled = True

    def __init__(self, params: ParamsT, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         foreach=foreach, maximize=maximize, capturable=capturable, fused=fused)
