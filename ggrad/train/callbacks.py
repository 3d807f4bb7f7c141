"""Callbacks for `Trainer.fit` (Keras-style): History, EarlyStopping, ModelCheckpoint, LearningRateScheduler.

A callback sees the module being trained (`self.model`) and the trainer that runs the loop
(`self.trainer`: its `optimizer` and `stop_training`). When the trainer is mixed into the model, as
in `ggrad.Sequential`, both are the same object, as in Keras. Epoch logs are dicts of floats such as
`{"loss": 0.31, "accuracy": 0.9, "val_loss": 0.35, "val_accuracy": 0.88}`. The logs passed to
`on_batch_end` hold 0-d Tensors instead (`float(logs["loss"])` reads one), so that training does not
wait on the host after every batch.
"""

import inspect
import math
import warnings

from ..autograd import no_grad
from ..serialization import save


class Callback:
    """Base class: override the hooks you need. `self.model` is the module being trained, `self.trainer`
    the Trainer running the loop (the same object for `ggrad.Sequential`)."""

    def __init__(self):
        self.model = None
        self.trainer = None

    def set_model(self, model):
        self.model = model

    def set_trainer(self, trainer):
        self.trainer = trainer

    def on_train_begin(self, logs=None):
        pass

    def on_train_end(self, logs=None):
        pass

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_epoch_end(self, epoch, logs=None):
        pass

    def on_batch_begin(self, batch, logs=None):
        pass

    def on_batch_end(self, batch, logs=None):
        pass


class CallbackList:
    """Calls each hook on every callback, in order."""

    def __init__(self, callbacks, trainer, model):
        self.callbacks = list(callbacks)
        for cb in self.callbacks:
            if not isinstance(cb, Callback):
                raise TypeError(f"callbacks must be ggrad.train.Callback instances, got {type(cb).__name__}")
            cb.set_trainer(trainer)
            cb.set_model(model)

    def __getattr__(self, hook):
        if not hook.startswith("on_"):
            raise AttributeError(hook)

        def call(*args):
            for cb in self.callbacks:
                getattr(cb, hook)(*args)
        return call


class History(Callback):
    """Records the logs of every epoch: `history["loss"]` is the list of per-epoch training losses.

    `fit` returns one. Attributes: `history` (dict of lists), `epoch` (list of epoch indices),
    `params` (fit's settings).
    """

    def __init__(self):
        super().__init__()
        self.history = {}
        self.epoch = []
        self.params = {}

    def on_train_begin(self, logs=None):
        self.history = {}
        self.epoch = []

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(value)

    def __repr__(self):
        return f"History(epochs={len(self.epoch)}, keys={sorted(self.history)})"


def _mode_of(monitor, mode):
    if mode not in ("auto", "min", "max"):
        raise ValueError(f"mode must be 'auto', 'min' or 'max', got {mode!r}")
    if mode == "auto":
        return "max" if "acc" in monitor else "min"
    return mode


class _Monitor(Callback):
    """A callback that follows one quantity of the epoch logs and knows what an improvement is."""

    def __init__(self, monitor, mode, min_delta=0.0):
        super().__init__()
        self.monitor = monitor
        self.mode = _mode_of(monitor, mode)
        self.min_delta = abs(min_delta)
        self.best = math.inf if self.mode == "min" else -math.inf
        self._warned = False

    def _current(self, logs):
        value = (logs or {}).get(self.monitor)
        if value is None and not self._warned:
            self._warned = True
            warnings.warn(f"{type(self).__name__}: the monitored quantity {self.monitor!r} is not in the logs "
                          f"(available: {sorted(logs or {})}); pass validation data or choose another monitor",
                          RuntimeWarning, stacklevel=3)
        return value

    def _improved(self, current, reference):
        if self.mode == "min":
            return current < reference - self.min_delta
        return current > reference + self.min_delta


def snapshot_state(model):
    """Copies of the model's parameters and buffers, made on the device with the next graph."""
    with no_grad():
        return {k: v.clone() for k, v in model.state_dict().items()}


class EarlyStopping(_Monitor):
    """Stop training when `monitor` has not improved for `patience` epochs.

    Args:
        monitor (str): quantity to watch. Default: "val_loss".
        min_delta (float): smallest change that counts as an improvement. Default: 0.
        patience (int): epochs without improvement before stopping. Default: 0.
        mode (str): "min", "max" or "auto" (max for accuracies, else min). Default: "auto".
        restore_best_weights (bool): at the end of training, put back the weights of the best
            epoch. Default: True.
        baseline (float, optional): training stops unless the monitor beats it within `patience` epochs.
        verbose (int): print a line when stopping. Default: 0.

    Attributes: `best`, `best_epoch`, `stopped_epoch` (0 when it did not stop).
    """

    def __init__(self, monitor="val_loss", min_delta=0.0, patience=0, mode="auto", restore_best_weights=True,
                 baseline=None, verbose=0):
        super().__init__(monitor, mode, min_delta)
        if patience < 0:
            raise ValueError(f"Invalid patience: {patience} (expected >= 0)")
        self.patience = patience
        self.restore_best_weights = restore_best_weights
        self.baseline = baseline
        self.verbose = verbose

    def on_train_begin(self, logs=None):
        self.wait = 0
        self.stopped_epoch = 0
        self.best_epoch = 0
        self.best = math.inf if self.mode == "min" else -math.inf
        self.best_weights = None

    def on_epoch_end(self, epoch, logs=None):
        current = self._current(logs)
        if current is None:
            return
        self.wait += 1
        if self._improved(current, self.best):
            self.best = current
            self.best_epoch = epoch
            if self.restore_best_weights:
                self.best_weights = snapshot_state(self.model)
            if self.baseline is None or self._improved(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.trainer.stop_training = True

    def on_train_end(self, logs=None):
        if self.stopped_epoch and self.verbose:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping")
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose:
                print(f"Restoring model weights from the end of the best epoch: {self.best_epoch + 1}")
            self.model.load_state_dict(self.best_weights)


class ModelCheckpoint(_Monitor):
    """Save the model after each epoch (or only when `monitor` improved).

    Args:
        filepath (str or PathLike): where to save; may contain format fields such as `{epoch:02d}` or
            `{val_loss:.3f}` (filled from the epoch number, 1-based, and the logs).
        monitor (str): quantity to watch with save_best_only. Default: "val_loss".
        save_best_only (bool): save only when the monitored quantity improved. Default: False.
        save_weights_only (bool): save the state dict (`ggrad.save`) instead of `model.save`. Default: False.
        mode (str): "min", "max" or "auto". Default: "auto".
        verbose (int): print a line for each save. Default: 0.
    """

    def __init__(self, filepath, monitor="val_loss", save_best_only=False, save_weights_only=False, mode="auto",
                 verbose=0):
        super().__init__(monitor, mode)
        self.filepath = str(filepath)
        self.save_best_only = save_best_only
        self.save_weights_only = save_weights_only
        self.verbose = verbose
        self.saved = []

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.save_best_only:
            current = self._current(logs)
            if current is None or not self._improved(current, self.best):
                return
            self.best = current
        path = self.filepath.format(epoch=epoch + 1, **logs)
        if self.save_weights_only or not hasattr(self.model, "save"):
            save(self.model.state_dict(), path)
        else:
            self.model.save(path)
        self.saved.append(path)
        if self.verbose:
            print(f"Epoch {epoch + 1}: saved model to {path}")


class LearningRateScheduler(Callback):
    """Set the learning rate at the start of each epoch from `schedule(epoch)` or `schedule(epoch, lr)`.

    Args:
        schedule (callable): epoch index (0-based) [and current lr] -> new lr (a float).
        verbose (int): print the new lr each epoch. Default: 0.

    The lr of every param group of the model's optimizer is set; the epoch logs get an "lr" entry.
    """

    def __init__(self, schedule, verbose=0):
        super().__init__()
        if not callable(schedule):
            raise TypeError(f"schedule must be callable, got {type(schedule).__name__}")
        self.schedule = schedule
        self.verbose = verbose
        try:
            params = inspect.signature(schedule).parameters.values()
            positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            self._takes_lr = len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)
        except (TypeError, ValueError):
            self._takes_lr = False

    def _groups(self):
        optimizer = getattr(self.trainer, "optimizer", None)
        if optimizer is None:
            raise RuntimeError("LearningRateScheduler: the model has no optimizer; compile() it first")
        return optimizer.param_groups

    def on_epoch_begin(self, epoch, logs=None):
        groups = self._groups()
        lr = float(groups[0]["lr"])
        new = self.schedule(epoch, lr) if self._takes_lr else self.schedule(epoch)
        try:
            new = float(new)
        except (TypeError, ValueError):
            raise ValueError(f"LearningRateScheduler: schedule returned {new!r}, expected a float") from None
        if not math.isfinite(new) or new < 0:
            raise ValueError(f"LearningRateScheduler: schedule returned an invalid learning rate: {new}")
        for group in groups:
            group["lr"] = new
        if self.verbose:
            print(f"Epoch {epoch + 1}: LearningRateScheduler setting learning rate to {new}.")

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = float(self._groups()[0]["lr"])
