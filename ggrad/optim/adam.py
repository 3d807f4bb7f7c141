"""Adam (Kingma & Ba) with PyTorch's L2 weight decay: the gradient gets weight_decay * p added."""

from .adamw import AdamW, adamw


class Adam(AdamW):
    """Adam, as PyTorch's `torch.optim.Adam`.

    The update is AdamW's with the weight decay folded into the gradient (g <- g + weight_decay * p, after
    negating g when maximizing) instead of decoupled from it, so the moments see the decay.

    Args:
        params: iterable of Tensors or of parameter-group dicts.
        lr (float): learning rate. Default: 1e-3.
        betas (tuple[float, float]): decay rates of the first and second moments. Default: (0.9, 0.999).
        eps (float): added to the denominator. Default: 1e-8.
        weight_decay (float): L2 penalty coefficient. Default: 0.
        amsgrad (bool): use the running maximum of the second moment. Default: False.
        maximize (bool): maximize the objective instead of minimizing it. Default: False.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                 maximize=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         maximize=maximize)

    def _adam(self, group, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, beta1, beta2):
        wd = group["weight_decay"]
        grads = [-g if group["maximize"] else g for g in grads]
        if wd != 0:
            grads = [g + p.detach().to(g.dtype) * wd for g, p in zip(grads, params)]
        adamw(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, amsgrad=group["amsgrad"],
              beta1=beta1, beta2=beta2, lr=group["lr"], weight_decay=0.0, eps=group["eps"])
