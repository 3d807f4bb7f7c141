"""The multiplicative and periodic learning-rate schedules of PyTorch: MultiStepLR, ExponentialLR,
MultiplicativeLR, ConstantLR, LinearLR, PolynomialLR, CosineAnnealingWarmRestarts, CyclicLR.

The first six are chainable as PyTorch's: each step scales the current `group["lr"]`, so two of them
compose (ChainedScheduler) and a learning rate changed from outside carries on; `step(epoch)` uses the
closed form from `base_lrs`. The last two compute the learning rate from `base_lrs` each step.
"""

from __future__ import annotations

import bisect
import collections
import math
import numbers

from .lr_scheduler_base import LambdaScheduler, LRScheduler, check_optimizer, per_group

__all__ = ["MultiStepLR", "ExponentialLR", "MultiplicativeLR", "ConstantLR", "LinearLR", "PolynomialLR",
           "CosineAnnealingWarmRestarts", "CyclicLR"]


def _lrs(scheduler):
    return [group["lr"] for group in scheduler.optimizer.param_groups]


class MultiStepLR(LRScheduler):
    """Multiply the learning rate by `gamma` at each milestone epoch (twice at a milestone given twice).

    lr = initial_lr * gamma ** (number of milestones <= epoch)

    Args:
        optimizer (Optimizer): wrapped optimizer.
        milestones (list of int): the epochs where the learning rate drops.
        gamma (float): multiplicative factor. Default: 0.1.
        last_epoch (int): Default: -1.
    """

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = collections.Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return _lrs(self)
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in _lrs(self)]

    def _closed_form_lr(self):
        passed = bisect.bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base * self.gamma ** passed for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the learning rate by `gamma` every epoch: lr = initial_lr * gamma ** epoch.

    Args:
        optimizer (Optimizer): wrapped optimizer.
        gamma (float): multiplicative factor.
        last_epoch (int): Default: -1.
    """

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return _lrs(self) if self._initial else [lr * self.gamma for lr in _lrs(self)]

    def _closed_form_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class MultiplicativeLR(LambdaScheduler):
    """Multiply the learning rate by `lr_lambda(epoch)` every epoch after the first.

    Args:
        optimizer (Optimizer): wrapped optimizer.
        lr_lambda (callable or list): a function of the epoch, or one per param group.
        last_epoch (int): Default: -1.
    """

    def get_lr(self):
        if self._initial:
            return _lrs(self)
        return [lr * fn(self.last_epoch) for lr, fn in zip(_lrs(self), self.lr_lambdas)]


class ConstantLR(LRScheduler):
    """Multiply the learning rate by `factor` until epoch `total_iters`, then restore it.

    lr = initial_lr * (factor if epoch < total_iters else 1)

    Args:
        optimizer (Optimizer): wrapped optimizer.
        factor (float): in [0, 1]. Default: 1/3.
        total_iters (int): epochs of the reduced rate. Default: 5.
        last_epoch (int): Default: -1.
    """

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if not 0 <= factor <= 1:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.factor for lr in _lrs(self)]
        if self.last_epoch != self.total_iters:
            return _lrs(self)
        return [lr / self.factor for lr in _lrs(self)]

    def _closed_form_lr(self):
        scale = self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor)
        return [base * scale for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the learning rate by a factor going linearly from `start_factor` to `end_factor` over
    `total_iters` epochs.

    lr = initial_lr * (start_factor + (end_factor - start_factor) * min(epoch, total_iters) / total_iters)

    Args:
        optimizer (Optimizer): wrapped optimizer.
        start_factor (float): in (0, 1]. Default: 1/3.
        end_factor (float): in [0, 1]. Default: 1.
        total_iters (int): epochs of the ramp. Default: 5.
        last_epoch (int): Default: -1.
    """

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if not 0 < start_factor <= 1:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.")
        if not 0 <= end_factor <= 1:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in _lrs(self)]
        if self._initial or self.last_epoch > self.total_iters:
            return _lrs(self)
        rise = self.end_factor - self.start_factor
        scale = 1 + rise / (self.total_iters * self.start_factor + (self.last_epoch - 1) * rise)
        return [lr * scale for lr in _lrs(self)]

    def _closed_form_lr(self):
        done = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * (self.start_factor + (self.end_factor - self.start_factor) * done) for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """Decay the learning rate polynomially to 0 over `total_iters` epochs.

    lr = initial_lr * (1 - min(epoch, total_iters) / total_iters) ** power

    Args:
        optimizer (Optimizer): wrapped optimizer.
        total_iters (int): epochs of the decay. Default: 5.
        power (float): the polynomial's power. Default: 1.
        last_epoch (int): Default: -1.
    """

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._initial or self.last_epoch > self.total_iters:
            return _lrs(self)
        e, n = self.last_epoch, self.total_iters
        scale = ((1.0 - e / n) / (1.0 - (e - 1) / n)) ** self.power
        return [lr * scale for lr in _lrs(self)]

    def _closed_form_lr(self):
        left = 1.0 - min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * left ** self.power for base in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from the initial learning rate to `eta_min`, restarted after `T_0` epochs, then after
    `T_0 * T_mult`, `T_0 * T_mult**2`, ... (SGDR).

    lr = eta_min + (initial_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2

    `step(epoch)` takes a fractional epoch too (`epoch + i / iters` inside an epoch).

    Args:
        optimizer (Optimizer): wrapped optimizer.
        T_0 (int): epochs until the first restart.
        T_mult (int): growth of the period after each restart. Default: 1.
        eta_min (float): the lowest learning rate. Default: 0.
        last_epoch (int): Default: -1.
    """

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if isinstance(T_0, bool) or not isinstance(T_0, numbers.Integral) or T_0 <= 0:
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if isinstance(T_mult, bool) or not isinstance(T_mult, numbers.Integral) or T_mult < 1:
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, numbers.Real):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        lo = self.eta_min
        return [lo + (base - lo) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2 for base in self.base_lrs]

    def step(self, epoch=None):
        """Advance one epoch, or go to `epoch` (a float is a point inside an epoch)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur -= self.T_i
                self.T_i *= self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            self.T_cur, self.T_i = self._position(epoch)
        self.last_epoch = math.floor(epoch)
        self._step_count += 1
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = _lrs(self)

    def _position(self, epoch):
        """(T_cur, T_i): where `epoch` falls in its period, and that period's length."""
        if epoch < self.T_0:
            return epoch, self.T_0
        if self.T_mult == 1:
            return epoch % self.T_0, self.T_0
        restarts = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
        start = self.T_0 * (self.T_mult ** restarts - 1) / (self.T_mult - 1)
        return epoch - start, self.T_0 * self.T_mult ** restarts


_SCALES = {"triangular": (lambda x: 1.0, "cycle"), "triangular2": (lambda x: 1 / (2.0 ** (x - 1)), "cycle"),
           "exp_range": (None, "iterations")}


class CyclicLR(LRScheduler):
    """The learning rate cycles between `base_lr` and `max_lr` (one `step()` per batch), the momentum
    inversely between `max_momentum` and `base_momentum` when `cycle_momentum`.

    In cycle c (from 1) at position x in [0, 1): the rise takes `step_size_up` steps, the fall
    `step_size_down`; lr = base_lr + (max_lr - base_lr) * height(x) * scale, with scale 1 ("triangular"),
    1 / 2 ** (c - 1) ("triangular2"), gamma ** step ("exp_range"), or `scale_fn` of the cycle or the step
    (`scale_mode`).

    Args:
        optimizer (Optimizer): wrapped optimizer (with momentum, or Adam-style betas, for cycle_momentum).
        base_lr, max_lr (float or list): the bounds, per group or for all.
        step_size_up (int): steps of the rise. Default: 2000.
        step_size_down (int or None): steps of the fall; None: as the rise. Default: None.
        mode (str): "triangular", "triangular2" or "exp_range". Default: "triangular".
        gamma (float): the decay of "exp_range". Default: 1.
        scale_fn (callable or None): a custom scale, replacing `mode`. Default: None.
        scale_mode (str): "cycle" or "iterations", what scale_fn reads. Default: "cycle".
        cycle_momentum (bool): cycle the momentum too. Default: True.
        base_momentum, max_momentum (float or list): the momentum's bounds. Default: 0.8, 0.9.
        last_epoch (int): Default: -1.
    """

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None, mode="triangular",
                 gamma=1.0, scale_fn=None, scale_mode="cycle", cycle_momentum=True, base_momentum=0.8,
                 max_momentum=0.9, last_epoch=-1):
        check_optimizer(optimizer)
        base_lrs = per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for group, lr in zip(optimizer.param_groups, base_lrs):
                group["lr"] = lr
        self.max_lrs = per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size, self.step_ratio = up + down, up / (up + down)
        if mode not in _SCALES and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma = mode, gamma
        if scale_fn is None:
            fn, self.scale_mode = _SCALES[mode]
            self._scale_fn = fn if fn is not None else (lambda x: self.gamma ** x)
        else:
            self._scale_fn, self.scale_mode = scale_fn, scale_mode
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for group, m in zip(optimizer.param_groups, self.max_momentums):
                    self._set_momentum(group, m)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _set_momentum(self, group, value):
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def get_lr(self):
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        height = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        scale = self._scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base + (top - base) * height * scale for base, top in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, low, high in zip(self.optimizer.param_groups, self.base_momentums, self.max_momentums):
                self._set_momentum(group, high - (high - low) * height * scale)
        return lrs

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_scale_fn")}
