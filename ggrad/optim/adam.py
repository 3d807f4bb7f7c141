"""Adam (Kingma & Ba): the `Adam` class and the pure `adamw` update it and `AdamW` share.

The update decouples its weight decay (p <- p * (1 - lr * weight_decay)); Adam's L2 decay is folded into
the gradient before it (g <- g + weight_decay * p), AdamW passes its decay through.
"""

from __future__ import annotations

from .. import ggml
from . import fused_updates
from ..autograd.factory import tensor, zeros_like
from ..autograd.ops import maximum
from .optimizer import ParamsT, Optimizer, check_adam_like, check_flags


class Adam(Optimizer):
    """Adam, as PyTorch's `torch.optim.Adam`.

    For each parameter p with gradient g, at step t:

        g <- g + weight_decay * p                         (after negating g when maximizing)
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
        weight_decay (float): L2 penalty coefficient. Default: 0.
        amsgrad (bool): use the running maximum of the second moment. Default: False.
        maximize (bool): maximize the objective instead of minimizing it. Default: False.
        foreach, capturable, fused: PyTorch's implementation switches, accepted (`check_flags`).
        decoupled_weight_decay (bool): decay the weights as AdamW does. Default: False.
    """

    skips_in_graph = True

    decoupled = False   # AdamW: the decay is the update's own, not the gradient's

    def __init__(self, params: ParamsT, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False) -> None:
        check_flags(foreach, fused, capturable)
        if decoupled_weight_decay:
            self.decoupled = True   # AdamW's decay, as PyTorch's Adam(decoupled_weight_decay=True)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group):
        check_adam_like(group)

    def _update_group(self, group):
        params = self._stepped(group, lambda p: {"exp_avg": zeros_like(p, dtype=ggml.f32),
                                                 "exp_avg_sq": zeros_like(p, dtype=ggml.f32)})
        states = [self.state[p] for p in params]
        if group["amsgrad"]:
            for p, state in zip(params, states):
                state.setdefault("max_exp_avg_sq", zeros_like(p, dtype=ggml.f32))
        grads, wd, maximize = [p.grad for p in params], group["weight_decay"], group["maximize"]
        if not self.decoupled:
            grads = [-g if maximize else g for g in grads]
            if wd != 0:
                grads = [g + p.detach().to(g.dtype) * wd for g, p in zip(grads, params)]
            wd, maximize = 0.0, False
        beta1, beta2 = group["betas"]
        adamw(params, grads, [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states],
              [s.get("max_exp_avg_sq") for s in states], [s["step"] for s in states], amsgrad=group["amsgrad"],
              beta1=beta1, beta2=beta2, lr=group["lr"], weight_decay=wd, eps=group["eps"], maximize=maximize)
        return params

    def _replay_hyperparameters(self, stepped):
        """A replayed step's host part (compile_step): each stepped parameter's count advanced, and the fused
        updates' hyper-parameters in the order `adamw` makes them; None where an update is composed of ops
        (amsgrad, half parameters), whose values are not all inputs of the graph."""
        values = []
        for group, params in zip(self.param_groups, stepped):
            if group["amsgrad"] or any(p.dtype is not ggml.f32 for p in params):
                return None
            beta1, beta2 = group["betas"]
            wd = group["weight_decay"] if self.decoupled else 0.0
            made = {}
            for p in params:
                t = self.state[p]["step"]
                if (p.device.name, t) not in made:
                    made[(p.device.name, t)] = fused_hyperparameters(group["lr"], beta1, beta2, group["eps"], wd, t)
            values.extend(made.values())
        return values

    def _replay_advance(self, stepped):
        for params in stepped:
            for p in params:
                self.state[p]["step"] += 1


def adamw(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, amsgrad, beta1, beta2, lr,
          weight_decay, eps, maximize=False):
    """Schedule one AdamW update of each parameter (in place, when the pending graph is computed).

    `state_steps` holds each parameter's step count t after this step (1 on the first). Moments are
    float32 tensors of the parameters' shapes; `max_exp_avg_sqs` entries are used only with amsgrad.
    """
    hparams, fused = {}, []
    for i, p in enumerate(params):
        t = state_steps[i]
        bc1 = 1.0 - beta1 ** t
        bc2 = 1.0 - beta2 ** t
        grad = -grads[i] if maximize else grads[i]
        if p.dtype is ggml.f32 and not amsgrad:
            key = (p.device.name, t)
            if key not in hparams:
                hparams[key] = fused_updates.hyperparameters(
                    fused_hyperparameters(lr, beta1, beta2, eps, weight_decay, t), p.device)
            fused.append((p, grad, exp_avgs[i], exp_avg_sqs[i], hparams[key]))
            continue
        _adamw_composed(p, grad, exp_avgs[i], exp_avg_sqs[i], max_exp_avg_sqs[i], amsgrad=amsgrad,
                        beta1=beta1, beta2=beta2, lr=lr, weight_decay=weight_decay, eps=eps, bc1=bc1, bc2=bc2,
                        hparams=hparams)
    fused_updates.adamw_all(fused)   # the fused steps of a device as one event of the graph cache


def fused_hyperparameters(lr, beta1, beta2, eps, weight_decay, t):
    """The values of the fused update's hyper-parameters at step count t (fused_updates.adamw_)."""
    return [lr, beta1, beta2, eps, weight_decay, 1.0 / (1.0 - beta1 ** t), 1.0 / (1.0 - beta2 ** t)]


def _adamw_composed(p, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, *, amsgrad, beta1, beta2, lr, weight_decay,
                    eps, bc1, bc2, hparams):
    """AdamW from tensor ops, in float32; the new values are written into the state's own memory.

    What changes from step to step (the bias corrections, a scheduled lr) enters as 0-d tensors, data
    of the graph rather than constants in it, so the next step reuses the cached graph."""
    g = grad if grad.dtype is ggml.f32 else grad.to(ggml.f32)
    m = exp_avg * beta1 + g * (1.0 - beta1)
    v = exp_avg_sq * beta2 + (g * g) * (1.0 - beta2)
    fused_updates.assign_(exp_avg, m)
    fused_updates.assign_(exp_avg_sq, v)
    if amsgrad:
        v = maximum(max_exp_avg_sq, v)
        fused_updates.assign_(max_exp_avg_sq, v)
    denom = v.sqrt() * _datum(hparams, p.device, 1.0 / bc2 ** 0.5) + eps
    if p.dtype is ggml.f32:
        # p * (1 - lr wd) - lr * (m / bc1) / denom, written in place by GGML's fused SGD step.
        key = ("sgd", p.device.name, lr, weight_decay)
        if key not in hparams:
            hparams[key] = fused_updates.hyperparameters([lr, weight_decay], p.device)
        fused_updates.sgd_(p, m / denom * _datum(hparams, p.device, 1.0 / bc1), hparams[key])
        return
    p32 = p.to(ggml.f32)
    fused_updates.assign_(p, p32 * _datum(hparams, p.device, 1.0 - lr * weight_decay)
                    - (m / denom) * _datum(hparams, p.device, lr / bc1))


def _datum(hparams, device, value):
    """`value` as a 0-d float32 tensor on `device`, one per value and device in a step's `hparams`."""
    key = ("datum", device.name, value)
    if key not in hparams:
        hparams[key] = tensor(value, device=device)
    return hparams[key]
