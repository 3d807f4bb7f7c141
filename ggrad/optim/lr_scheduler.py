"""Learning-rate schedulers with PyTorch's API (torch.optim.lr_scheduler): `scheduler.step()` after
`optimizer.step()`. This module holds LambdaLR, StepLR, CosineAnnealingLR, WarmupCosineLR, OneCycleLR and
ReduceLROnPlateau, and gathers the rest under PyTorch's path: the multiplicative schedules of
`lr_schedules` and the combinations of `lr_scheduler_chains`. The base class is in `lr_scheduler_base`.
"""

import math
import numbers

from .lr_scheduler_base import LambdaScheduler, LRScheduler
from .lr_scheduler_base import check_optimizer as _check_optimizer, per_group as _per_group
from .lr_schedules import (ConstantLR, CosineAnnealingWarmRestarts, CyclicLR, ExponentialLR, LinearLR,
                           MultiplicativeLR, MultiStepLR, PolynomialLR)
from .lr_scheduler_chains import ChainedScheduler, SequentialLR

_LRScheduler = LRScheduler   # PyTorch's older name, still subclassed by custom schedulers


class LambdaLR(LambdaScheduler):
    """lr = initial_lr * lr_lambda(epoch).

    Args:
        optimizer (Optimizer): wrapped optimizer.
        lr_lambda (callable or list): a function of the epoch, or one per param group.
        last_epoch (int): Default: -1.
    """

    def get_lr(self):
        return [base * fn(self.last_epoch) for base, fn in zip(self.base_lrs, self.lr_lambdas)]


class StepLR(LRScheduler):
    """Multiply the learning rate by `gamma` every `step_size` epochs.

    lr = initial_lr * gamma ** (epoch // step_size)

    Args:
        optimizer (Optimizer): wrapped optimizer.
        step_size (int): period of the decay, in epochs.
        gamma (float): multiplicative factor. Default: 0.1.
        last_epoch (int): Default: -1.
    """

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        if not isinstance(step_size, numbers.Integral) or step_size <= 0:
            raise ValueError(f"Invalid step_size: {step_size} (expected a positive int)")
        self.step_size = int(step_size)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from the initial learning rate to `eta_min` over `T_max` epochs (no restarts).

    lr = eta_min + (initial_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2

    Computed recursively from the current lr, as PyTorch does, so changes made from outside compose.

    Args:
        optimizer (Optimizer): wrapped optimizer.
        T_max (int): number of epochs of the half cosine.
        eta_min (float): the final learning rate. Default: 0.
        last_epoch (int): Default: -1.
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        if T_max <= 0:
            raise ValueError(f"Invalid T_max: {T_max} (expected > 0)")
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        e, T, lo = self.last_epoch, self.T_max, self.eta_min
        if self._initial:
            return [g["lr"] for g in groups]
        if self._step_count == 1 and e > 0:
            return [lo + (base - lo) * (1 + math.cos(e * math.pi / T)) / 2 for base in self.base_lrs]
        if (e - 1 - T) % (2 * T) == 0:
            return [g["lr"] + (base - lo) * (1 - math.cos(math.pi / T)) / 2 for base, g in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T)) * (g["lr"] - lo) + lo
                for g in groups]

    def _closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class WarmupCosineLR(LRScheduler):
    """Linear warmup from 0 to the initial learning rate, then cosine decay to `min_lr`.

    For step t (one `step()` per batch, usually):

        lr = initial_lr * t / warmup_steps                                      t < warmup_steps
        lr = min_lr + (initial_lr - min_lr) * (1 + cos(pi * q)) / 2             otherwise,
             q = min(1, (t - warmup_steps) / (total_steps - warmup_steps))

    The lr is 0 on the first step when warmup_steps > 0 (as in Hugging Face's
    `get_cosine_schedule_with_warmup`, which this equals for min_lr = 0), reaches initial_lr at
    t = warmup_steps and min_lr at t = total_steps, and stays there.

    Args:
        optimizer (Optimizer): wrapped optimizer.
        warmup_steps (int): length of the linear warmup (0 for none).
        total_steps (int): step at which the decay reaches min_lr (> warmup_steps).
        min_lr (float or list): final learning rate (per group if a list). Default: 0.
        last_epoch (int): Default: -1.
    """

    def __init__(self, optimizer, warmup_steps, total_steps, min_lr=0.0, last_epoch=-1):
        _check_optimizer(optimizer)
        if warmup_steps < 0:
            raise ValueError(f"Invalid warmup_steps: {warmup_steps} (expected >= 0)")
        if total_steps <= warmup_steps:
            raise ValueError(f"Invalid total_steps: {total_steps} (expected > warmup_steps={warmup_steps})")
        self.warmup_steps = int(warmup_steps)
        self.total_steps = int(total_steps)
        self.min_lrs = _per_group("min_lr", optimizer, min_lr)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return self._closed_form_lr()

    def _closed_form_lr(self):
        t = self.last_epoch
        if t < self.warmup_steps:
            return [base * t / self.warmup_steps for base in self.base_lrs]
        q = min(1.0, (t - self.warmup_steps) / (self.total_steps - self.warmup_steps))
        c = (1.0 + math.cos(math.pi * q)) / 2
        return [lo + (base - lo) * c for base, lo in zip(self.base_lrs, self.min_lrs)]


LinearWarmupCosine = WarmupCosineLR


class OneCycleLR(LRScheduler):
    """The 1cycle policy: anneal from max_lr/div_factor up to max_lr, then down to a much lower min_lr.

    One `step()` per batch. With `cycle_momentum`, the momentum (SGD) or beta1 (AdamW) is annealed
    inversely between max_momentum and base_momentum. Matches `torch.optim.lr_scheduler.OneCycleLR`.

    Args:
        optimizer (Optimizer): wrapped optimizer.
        max_lr (float or list): peak learning rate per group.
        total_steps (int): steps in the cycle (or give epochs and steps_per_epoch).
        epochs (int), steps_per_epoch (int): total_steps = epochs * steps_per_epoch.
        pct_start (float): fraction of the cycle spent increasing the lr. Default: 0.3.
        anneal_strategy (str): "cos" or "linear". Default: "cos".
        cycle_momentum (bool): Default: True.
        base_momentum (float or list): Default: 0.85.
        max_momentum (float or list): Default: 0.95.
        div_factor (float): initial_lr = max_lr / div_factor. Default: 25.
        final_div_factor (float): min_lr = initial_lr / final_div_factor. Default: 1e4.
        three_phase (bool): the paper's three phases instead of fastai's two. Default: False.
        last_epoch (int): index of the last batch. Default: -1.
    """

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95,
                 div_factor=25.0, final_div_factor=1e4, three_phase=False, last_epoch=-1):
        _check_optimizer(optimizer)
        if total_steps is not None:
            if not isinstance(total_steps, numbers.Integral) or total_steps <= 0:
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = int(total_steps)
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, numbers.Integral) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, numbers.Integral) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            self.total_steps = int(epochs * steps_per_epoch)
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if not 0.0 <= pct_start <= 1.0:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self.anneal_strategy = anneal_strategy
        n = self.total_steps
        if three_phase:
            self._phases = [
                (float(pct_start * n) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (float(2 * pct_start * n) - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                (n - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._phases = [
                (float(pct_start * n) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (n - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for lr, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            max_m = _per_group("max_momentum", optimizer, max_momentum)
            base_m = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for mm, bm, group in zip(max_m, base_m, optimizer.param_groups):
                    self._set_momentum(group, mm)
                    group["max_momentum"] = mm
                    group["base_momentum"] = bm
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group, value):
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total steps is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr0, lr1, m0, m1) in enumerate(self._phases):
                if step <= end or i == len(self._phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(group[lr0], group[lr1], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[m0], group[m1], pct))
                    break
                start = end
        return lrs


class ReduceLROnPlateau(LRScheduler):
    """Multiply the learning rate by `factor` when a metric has stopped improving for `patience` epochs.

    Call `step(metric)` once per epoch (after validation). Matches PyTorch's scheduler of the same name.

    Args:
        optimizer (Optimizer): wrapped optimizer.
        mode (str): "min" (the metric should decrease) or "max". Default: "min".
        factor (float): new_lr = lr * factor (< 1). Default: 0.1.
        patience (int): epochs without improvement tolerated before reducing. Default: 10.
        threshold (float): minimal significant change. Default: 1e-4.
        threshold_mode (str): "rel" (best * (1 -/+ threshold)) or "abs" (best -/+ threshold). Default: "rel".
        cooldown (int): epochs to wait after a reduction before counting again. Default: 0.
        min_lr (float or list): lower bound of the lr (per group if a list). Default: 0.
        eps (float): reductions smaller than this are skipped. Default: 1e-8.
    """

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0.0, eps=1e-8):
        _check_optimizer(optimizer)
        if factor >= 1.0:
            raise ValueError(f"Factor should be < 1.0, got {factor}")
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode!r} is unknown (expected 'min' or 'max')")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode!r} is unknown (expected 'rel' or 'abs')")
        self.optimizer = optimizer
        self.factor = factor
        self.min_lrs = _per_group("min_lr", optimizer, min_lr)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]
        self.best = math.inf if mode == "min" else -math.inf
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def is_better(self, a, best):
        if self.mode == "min":
            return a < (best * (1.0 - self.threshold) if self.threshold_mode == "rel" else best - self.threshold)
        return a > (best * (1.0 + self.threshold) if self.threshold_mode == "rel" else best + self.threshold)

    def step(self, metrics):
        """Record one epoch's metric (a number or a one-element Tensor) and reduce the lr if it stalled."""
        current = float(metrics)
        self.last_epoch += 1
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for i, group in enumerate(self.optimizer.param_groups):
                old = float(group["lr"])
                new = max(old * self.factor, self.min_lrs[i])
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]
