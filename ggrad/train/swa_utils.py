"""Weight averaging (PyTorch's torch.optim.swa_utils): `AveragedModel` (stochastic weight averaging, or an
exponential moving average with `get_ema_multi_avg_fn`), `update_bn` and the `SWALR` schedule.

`ggrad.optim.swa_utils` names this module: it lives above nn and optim because AveragedModel is a Module and
optim does not import nn (DESIGN.md's layers).
"""

import copy
import itertools
import math

from ..autograd import no_grad
from ..autograd.factory import tensor
from ..autograd.torch_dtypes import INT64
from ..nn.batch_norm import _BatchNorm
from ..nn.group_norm import _InstanceNorm
from ..nn.module import Module
from ..optim.lr_scheduler_base import LRScheduler, per_group

__all__ = ["AveragedModel", "SWALR", "update_bn", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn", "get_ema_avg_fn",
           "get_swa_avg_fn"]


def _check_decay(decay):
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def _lerp_into(averaged, current, weight):
    """averaged += weight * (current - averaged), in place, for each pair (no gradient)."""
    with no_grad():
        for a, c in zip(averaged, current):
            a.copy_(a + (c - a) * weight)


def get_ema_multi_avg_fn(decay=0.999):
    """An update of every averaged parameter at once: ema = decay * ema + (1 - decay) * current."""
    _check_decay(decay)

    def ema_update(ema_params, current_params, num_averaged):
        _lerp_into(ema_params, current_params, 1.0 - decay)
    return ema_update


def get_swa_multi_avg_fn():
    """An update of every averaged parameter at once: the running mean of the n + 1 models seen."""
    def swa_update(averaged_params, current_params, num_averaged):
        _lerp_into(averaged_params, current_params, 1.0 / (float(num_averaged) + 1.0))
    return swa_update


def get_ema_avg_fn(decay=0.999):
    """avg_fn(ema, current, n) = decay * ema + (1 - decay) * current, one parameter at a time."""
    _check_decay(decay)

    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """avg_fn(averaged, current, n) = averaged + (current - averaged) / (n + 1)."""
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (float(num_averaged) + 1.0)
    return swa_update


class AveragedModel(Module):
    """A copy of `model` whose parameters (and with `use_buffers`, buffers) hold an average of the models
    passed to `update_parameters`: their running mean by default, or what `avg_fn` (one tensor at a time) or
    `multi_avg_fn` (all at once) computes. The first update copies the model. Its forward is the copy's.

    Args:
        model (Module): the model to average. device: where the copy lives (default: the model's).
        avg_fn, multi_avg_fn: the averaging rule (at most one). use_buffers (bool): average the buffers too,
            else copy the model's at each update.
    """

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=INT64, device=device))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _tensors(self, module):
        if self.use_buffers:
            return list(itertools.chain(module.parameters(), module.buffers()))
        return list(module.parameters())

    def update_parameters(self, model):
        """Fold `model`'s current parameters into the average."""
        averaged = self._tensors(self.module)
        current = [t.detach().to(a.device) for a, t in zip(averaged, self._tensors(model))]
        n = int(self.n_averaged.item())
        with no_grad():
            if n == 0:   # clone: ggrad's copy_ may take over its source's memory, which the optimizer updates
                for a, c in zip(averaged, current):
                    a.copy_(c.clone())
            elif self.multi_avg_fn is not None:
                self.multi_avg_fn(averaged, current, self.n_averaged)
            elif self.avg_fn is not None:
                for a, c in zip(averaged, current):
                    a.copy_(self.avg_fn(a.detach(), c, self.n_averaged))
            else:
                get_swa_multi_avg_fn()(averaged, current, n)
            if not self.use_buffers:   # the buffers follow the model
                for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                    b_avg.copy_(b_model.detach().to(b_avg.device).clone())
            self.n_averaged.add_(1)


def update_bn(loader, model, device=None):
    """Recompute the running statistics of `model`'s batch-norm layers in one pass over `loader` (batches are
    tensors, or lists/tuples whose first element is the input), as a cumulative average."""
    momenta = {m: m.momentum for m in model.modules()
               if isinstance(m, _BatchNorm) and not isinstance(m, _InstanceNorm) and m.track_running_stats}
    if not momenta:
        return
    was_training = model.training
    model.train()
    for m in momenta:
        m.reset_running_stats()
        m.momentum = None
    with no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for m, momentum in momenta.items():
        m.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's learning rate to `swa_lr` over `anneal_epochs` steps ("cos" or "linear"), then
    holds it (PyTorch's SWALR).

    Args:
        optimizer (Optimizer). swa_lr (float or list): the target per group. anneal_epochs (int, default 10).
        anneal_strategy (str, default "cos"). last_epoch (int, default -1).
    """

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        for lr, group in zip(per_group("swa_lr", optimizer, swa_lr), optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_strategy, self.anneal_epochs = anneal_strategy, anneal_epochs
        super().__init__(optimizer, last_epoch)

    def anneal_func(self, t):
        return (1 - math.cos(math.pi * t)) / 2 if self.anneal_strategy == "cos" else t

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        return swa_lr if alpha == 1 else (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        groups = self.optimizer.param_groups
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev_lrs)]
