"""Schedulers made of schedulers, as PyTorch's: SequentialLR (one after another, switching at milestones) and
ChainedScheduler (all of them every step, each scaling what the one before set)."""

from __future__ import annotations

import bisect

from .lr_scheduler_base import LRScheduler

__all__ = ["SequentialLR", "ChainedScheduler"]


def _check_schedulers(kind, schedulers, optimizer):
    """PyTorch's checks: at least one scheduler, all of `optimizer`, none a ReduceLROnPlateau."""
    if len(schedulers) < 1:
        raise ValueError(f"{kind} expects at least one scheduler, but got no scheduler.")
    for i, scheduler in enumerate(schedulers):
        if not hasattr(scheduler, "optimizer"):
            raise TypeError(f"{kind} at index {i} should have `optimizer` as its attribute.")
        if type(scheduler).__name__ == "ReduceLROnPlateau":
            raise ValueError(f"{kind} does not support `ReduceLROnPlateau` scheduler as it requires additional "
                             f"kwargs to be specified when calling `step`, but got one at index {i} in the given "
                             "schedulers sequence.")
        if scheduler.optimizer is not optimizer:
            raise ValueError(f"{kind} expects all schedulers to belong to the same optimizer, but got scheduler "
                             f"{type(scheduler).__name__} at index {i} with a different optimizer")


class _Composite(LRScheduler):
    """State of a scheduler holding others: their state dicts go with its own."""

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        inner = state.pop("_schedulers")
        self.__dict__.update(state)
        for scheduler, s in zip(self._schedulers, inner):
            scheduler.load_state_dict(s)


def _undo_first_steps(scheduler):
    """Take back the step each scheduler took when it was made (nested combinations too)."""
    for s in getattr(scheduler, "_schedulers", []):
        if hasattr(s, "_schedulers"):
            _undo_first_steps(s)
        else:
            s.last_epoch -= 1


class SequentialLR(_Composite):
    """`schedulers[i]` drives the learning rate from `milestones[i - 1]` (0 for the first) on; each starts at
    its own epoch 0 when its turn comes.

    Args:
        optimizer (Optimizer): the optimizer all the schedulers were made for.
        schedulers (list): the schedulers, in order.
        milestones (list of int): the epochs at which the next one takes over (one fewer than schedulers).
        last_epoch (int): Default: -1.
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        _check_schedulers("SequentialLR", schedulers, optimizer)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to be one more than the "
                             f"number of milestone points, but got number of schedulers {len(schedulers)} and the "
                             f"number of milestones to be equal to {len(milestones)}")
        self._schedulers, self._milestones = list(schedulers), list(milestones)
        self.optimizer, self.last_epoch = optimizer, last_epoch + 1
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        _undo_first_steps(self)
        first = self._schedulers[bisect.bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def step(self):
        self.last_epoch += 1
        index = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            scheduler.step(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_Composite):
    """Every step, step each of `schedulers` in order: their (chainable) factors multiply.

    Args:
        schedulers (list): the schedulers, of one optimizer.
        optimizer (Optimizer or None): that optimizer; None takes the first scheduler's. Default: None.
    """

    def __init__(self, schedulers, optimizer=None):
        optimizer = optimizer if optimizer is not None else (schedulers[0].optimizer if schedulers else None)
        _check_schedulers("ChainedScheduler", schedulers, optimizer)
        self._schedulers, self.optimizer = list(schedulers), optimizer
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

    def step(self):
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]
