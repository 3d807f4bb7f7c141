"""The base of the learning-rate schedulers: `LRScheduler` (PyTorch's torch.optim.lr_scheduler.LRScheduler).

The schedulers only change `param_group["lr"]` (host floats): the optimizers pass hyper-parameters to GGML
as a small input tensor, so a new learning rate never changes the step's graph.
"""

from .optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaScheduler", "check_optimizer", "per_group"]


def check_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


def per_group(name, optimizer, value):
    """A value per param group from a scalar or a list (checked against the number of groups)."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"expected {len(optimizer.param_groups)} values for {name}, got {len(value)}")
        return list(value)
    return [value] * len(optimizer.param_groups)


class LRScheduler:
    """Base class: holds `base_lrs` and `last_epoch`; subclasses implement `get_lr()`.

    Constructing a scheduler records each group's `initial_lr` and takes the first step (epoch 0).

    Args:
        optimizer (Optimizer): the optimizer whose learning rates change.
        last_epoch (int): index of the last epoch; -1 starts afresh. Default: -1.
    """

    def __init__(self, optimizer, last_epoch=-1):
        check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when resuming a "
                                   "scheduler with last_epoch >= 0; load the optimizer's state dict first")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial = False
        self._initial_step()

    def _initial_step(self):
        """The first step (epoch 0), in which the chainable schedules keep the current learning rate."""
        self._step_count = 0
        self._initial = True
        try:
            self.step()
        finally:
            self._initial = False

    def get_lr(self):
        """The learning rates of the current `last_epoch` (one per param group; each scheduler defines it)."""
        raise NotImplementedError(f"{type(self).__name__} must define get_lr()")

    def get_last_lr(self):
        """The learning rates set by the most recent `step()`."""
        return list(self._last_lr)

    def step(self, epoch=None):
        """Advance one epoch (or jump to `epoch`, using the closed form where there is one)."""
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            values = self._closed_form_lr() if hasattr(self, "_closed_form_lr") else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self):
        """Everything but the optimizer (and callables, which cannot be saved)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer" and not callable(v)}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


class LambdaScheduler(LRScheduler):
    """A scheduler driven by `lr_lambda`, one function or one per param group (LambdaLR, MultiplicativeLR);
    the functions stay out of state dicts (they are often lambdas, which cannot be saved)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        check_optimizer(optimizer)
        self.lr_lambdas = per_group("lr_lambda", optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
