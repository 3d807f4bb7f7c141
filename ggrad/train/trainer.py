"""`Trainer`: the Keras-like loop (compile / fit / evaluate / predict) for any Module.

    trainer = ggrad.train.Trainer(model)          # any nn.Module
    trainer.compile(optimizer="adamw", loss="cross_entropy", metrics=["accuracy"], lr=1e-2)
    history = trainer.fit(x, y, epochs=10, batch_size=64, validation_split=0.2)
    history = trainer.fit(loader, epochs=3)       # or any iterable of (x, y) batches

Mixed into a Module (`class Net(Trainer, nn.Module)`) it trains that module itself, as Keras' Model
inherits its Trainer; `ggrad.Sequential` is such a model. `fit` is ggrad's one training loop: epochs,
callbacks, History, progress bar, around `train_step(x, y)`, the step of one batch, which a subclass
may replace (`ggrad.parallel.dp_train` does, to split each batch across devices).

`loss="cross_entropy"` takes LOGITS (it applies log_softmax itself, as PyTorch's does). Each training
batch (forward, loss, backward, optimizer step) is one GGML graph compute; losses and metrics stay on
the device and are read only when the progress bar refreshes and at the end of an epoch.
"""

import warnings

import numpy as np

from .. import ggml, nn, optim
from ..autograd import Tensor, no_grad, ops, realize
from ..autograd.compiled_step import compile_step
from ..autograd.factory import tensor
from .callbacks import CallbackList, History
from .data import array_batches, as_numpy, batch_count, check_positive_int, is_batches, pairs
from .logs import METRICS, Tracker, advance, detached, format_logs, progress_bar

LOSSES = {
    "cross_entropy": ops.cross_entropy, "nll": ops.nll_loss, "mse": ops.mse_loss, "mae": ops.l1_loss,
    "l1": ops.l1_loss, "huber": ops.huber_loss, "smooth_l1": ops.smooth_l1_loss,
    "bce_with_logits": ops.binary_cross_entropy_with_logits, "bce": ops.binary_cross_entropy,
}
_CLASS_INDEX_LOSSES = ("cross_entropy", "nll")
_OPTIMIZERS = {"adamw": lambda p, lr: optim.AdamW(p, lr=1e-3 if lr is None else lr),
               "adam": lambda p, lr: optim.AdamW(p, lr=1e-3 if lr is None else lr, weight_decay=0.0),
               "sgd": lambda p, lr: optim.SGD(p, lr=1e-2 if lr is None else lr)}


class Trainer:
    """Trains a Module: `Trainer(model)`, or mixed into a Module class (then it trains itself).

    Attributes:
        model: the module trained (`Trainer(model)` form).
        optimizer: set by `compile`.
        stop_training: set it to True (a callback does) to end `fit` after the current batch.
        history: the History of the last `fit`.
    """

    optimizer = None
    stop_training = False
    history = None
    _compiled = None

    def __init__(self, model=None):
        if isinstance(self, nn.Module):     # mixed into a Module: it trains itself
            if model is not None:
                raise TypeError(f"{type(self).__name__} trains itself: it takes no model argument")
            super().__init__()
            return
        if not isinstance(model, nn.Module):
            raise TypeError(f"Trainer(model): model must be an nn.Module, got {type(model).__name__}")
        self.model = model

    def _net(self):
        """The module trained: this object when mixed into a Module, else the one given."""
        return self if isinstance(self, nn.Module) else self.model

    def _ends(self):
        """(first, last) layer when the model is a Sequential (for input checks), else (None, None)."""
        net = self._net()
        if isinstance(net, nn.Sequential) and len(net):
            return net[0], net[-1]
        return None, None

    # ---- compile ------------------------------------------------------------------------------------
    def compile(self, optimizer="adamw", loss="cross_entropy", metrics=None, lr=None, clipnorm=None,
                jit_compile=False):
        """Choose the optimizer, the loss and the metrics for `fit` and `evaluate`.

        Args:
            optimizer (str or Optimizer): "adamw" (lr 1e-3), "adam" (AdamW without weight decay),
                "sgd" (lr 1e-2), or an Optimizer over this model's parameters.
            loss (str or callable): "cross_entropy" (LOGITS and class indices or probabilities),
                "nll", "mse", "mae"/"l1", "huber", "smooth_l1", "bce_with_logits", "bce", or
                `loss(output, target) -> 0-d Tensor` (mean over the batch).
            metrics (list): names ("accuracy", "binary_accuracy", "mae", "mse") or callables
                `metric(output, target) -> batch mean`.
            lr (float, optional): learning rate (overrides the optimizer's).
            clipnorm (float, optional): clip the gradients' joint norm to this before each step.
            jit_compile (bool): `fit` records `train_step` once per batch shape and replays it for the
                next batches (ggrad.compile_step: no op recorded in Python; the same values, bitwise). Keras'
                name. Default: False.
        """
        if isinstance(loss, str):
            if loss not in LOSSES:
                raise ValueError(f"compile: unknown loss {loss!r}; expected one of {sorted(LOSSES)} or a callable")
            loss_fn = LOSSES[loss]
        elif callable(loss):
            loss_fn = loss
        else:
            raise ValueError(f"compile: loss must be a name or a callable, got {type(loss).__name__}")
        metric_fns = []
        for m in metrics or []:
            if isinstance(m, str):
                if m not in METRICS:
                    raise ValueError(f"compile: unknown metric {m!r}; expected one of {sorted(METRICS)} or a "
                                     "callable")
                metric_fns.append((m, METRICS[m], True))
            elif callable(m):
                metric_fns.append((getattr(m, "__name__", type(m).__name__), m, False))
            else:
                raise ValueError(f"compile: metrics must be names or callables, got {m!r}")
        if isinstance(optimizer, optim.Optimizer):
            opt = optimizer
            if lr is not None:
                for group in opt.param_groups:
                    group["lr"] = lr
        elif isinstance(optimizer, str):
            if optimizer.lower() not in _OPTIMIZERS:
                raise ValueError(f"compile: unknown optimizer {optimizer!r}; expected 'adamw', 'adam', 'sgd' or an "
                                 "Optimizer")
            params = list(self._net().parameters())
            if not params:
                raise ValueError("compile: the model has no parameters to optimize")
            opt = _OPTIMIZERS[optimizer.lower()](params, lr)
        else:
            raise ValueError(f"compile: optimizer must be a name or an Optimizer, got {type(optimizer).__name__}")
        if loss == "cross_entropy" and isinstance(self._ends()[1], nn.Softmax):
            warnings.warn("compile: loss='cross_entropy' takes logits, but the model ends with a Softmax, so it "
                          "is trained on softmax(softmax(x)); remove the final Softmax layer (apply softmax to "
                          "predict()'s output when you need probabilities)", UserWarning, stacklevel=2)
        self.optimizer = opt
        self._compiled = {
            "loss_name": loss if isinstance(loss, str) else None, "loss": loss_fn, "metrics": metric_fns,
            "clipnorm": clipnorm, "jit_compile": bool(jit_compile),
            "config": {"optimizer": optimizer if isinstance(optimizer, str) else None,
                       "loss": loss if isinstance(loss, str) else None,
                       "metrics": [m for m in metrics or [] if isinstance(m, str)], "lr": lr, "clipnorm": clipnorm,
                       "jit_compile": bool(jit_compile)},
        }

    def _require_compiled(self, op):
        if self._compiled is None:
            raise RuntimeError(f"{op}: the model is not compiled; call model.compile(optimizer=..., loss=...) first")

    # ---- data ---------------------------------------------------------------------------------------
    def _device(self):
        for p in self._net().parameters():
            return p.device
        return ggml.device(None)

    def _features(self, x, op):
        x = as_numpy(x, "x", op)
        if x.ndim == 0 or len(x) == 0:
            raise ValueError(f"{op}: x must hold at least one sample, got shape {x.shape}")
        first = self._ends()[0]
        if isinstance(first, nn.Linear) and (x.ndim < 2 or x.shape[-1] != first.in_features):
            raise ValueError(f"{op}: x has shape {x.shape}, but the first layer is Linear(in_features="
                             f"{first.in_features}): expected (n_samples, {first.in_features})")
        return x.astype(np.float32, copy=False) if x.dtype.kind == "f" else x

    def _targets(self, x, y, op):
        y = as_numpy(y, "y", op)
        if y.ndim == 0 or len(y) != len(x):
            raise ValueError(f"{op}: x and y have different numbers of samples: {len(x)} and "
                             f"{len(y) if y.ndim else 'a scalar'}")
        loss_name = self._compiled["loss_name"]
        if loss_name in _CLASS_INDEX_LOSSES and y.ndim == 1:
            if y.dtype.kind == "f":
                if not np.all(np.isfinite(y)) or not np.all(y == np.round(y)):
                    raise ValueError(f"{op}: loss {loss_name!r} needs integer class indices in y "
                                     f"(or probabilities of shape (n, classes)), got non-integer values")
            y = y.astype(np.int32, copy=False)
            last = self._ends()[1]
            if isinstance(last, nn.Linear) and len(y) and (y.min() < 0 or y.max() >= last.out_features):
                raise ValueError(f"{op}: class indices in y must lie in [0, {last.out_features}) for a model "
                                 f"with {last.out_features} outputs; got values in [{y.min()}, {y.max()}]")
            return y
        return y.astype(np.float32, copy=False) if y.dtype.kind in "fb" or loss_name else y

    def _checked(self, batches, op):
        """Each (x, y) batch of an iterable, checked and converted as arrays are (Tensors pass as they are)."""
        for x, y in pairs(batches, op):
            if not isinstance(x, Tensor):
                x = self._features(x, op)
            if not isinstance(y, Tensor):
                y = self._targets(x, y, op)
            yield x, y

    def _source(self, x, y, batch_size, op):
        """(batches(shuffle) -> iterator of (x, y), number of batches or None, number of samples or None)."""
        if is_batches(x, y):
            return (lambda shuffle: self._checked(x, op)), batch_count(x), None
        x = self._features(x, op)
        y = self._targets(x, y, op)
        return (lambda shuffle: array_batches(x, y, batch_size, shuffle)), -(-len(x) // batch_size), len(x)

    def _on_device(self, a, device):
        return a.to(device) if isinstance(a, Tensor) else tensor(a, device=device)

    def _target_for(self, y, out, device):
        """The target batch as a Tensor, reshaped to the output's shape for elementwise losses."""
        is_float = y.dtype.is_float if isinstance(y, Tensor) else y.dtype.kind == "f"
        if is_float and tuple(y.shape) != out.shape and int(np.prod(y.shape)) == out.numel():
            y = y.reshape(out.shape)
        return self._on_device(y, device)

    def _batch_values(self, out, y):
        """(loss, [(sum, count) per metric]) of one batch, as pending tensors."""
        c = self._compiled
        loss = c["loss"](out, y)
        with no_grad():
            detached_out = out.detach()
            metrics = [fn(detached_out, y) if builtin else (fn(detached_out, y), None)
                       for _, fn, builtin in c["metrics"]]
        return loss, metrics

    # ---- the step of one batch ----------------------------------------------------------------------
    def train_step(self, x, y):
        """Forward, loss, backward and one optimizer step on a batch (one graph compute).

        Returns (loss, metrics): the batch's mean loss and [(sum, count) or (mean, None)] per metric,
        as pending tensors or floats. Override it for a custom step; `fit` calls it for every batch.
        """
        net, device = self._net(), self._device()
        self.optimizer.zero_grad()
        out = net(self._on_device(x, device))
        loss, metrics = self._batch_values(out, self._target_for(y, out, device))
        loss.backward()
        if self._compiled["clipnorm"] is not None:
            nn.utils.clip_grad_norm_(net.parameters(), self._compiled["clipnorm"])
        self.optimizer.step()
        return loss, metrics

    def _step_for_fit(self):
        """`train_step`, or with compile(jit_compile=True) its replayed form, fed the batch as Tensors."""
        if not self._compiled.get("jit_compile"):
            return self.train_step
        replayed, device = compile_step(self.train_step), self._device()
        return lambda x, y: replayed(self._on_device(x, device), self._on_device(y, device))

    # ---- fit / evaluate / predict -------------------------------------------------------------------
    def fit(self, x, y=None, epochs=1, batch_size=32, validation_split=0.0, validation_data=None, shuffle=True,
            callbacks=None, verbose=1, initial_epoch=0, max_steps=None):
        """Train for `epochs` passes over the data; returns a `History`.

        Args:
            x: inputs (numpy array or Tensor), samples along the first dimension; or, with y=None, an
                iterable of (x, y) batches (a DataLoader, a list; re-iterable when epochs > 1).
            y: targets: class indices for "cross_entropy"/"nll", values for regression losses.
            epochs (int): number of passes. Default: 1.
            batch_size (int): samples per step for arrays; the last, partial batch is used. Default: 32.
            validation_split (float): fraction of the samples, taken from the END of x and y before
                shuffling, held out to compute val_loss and val_metrics each epoch. Default: 0.
            validation_data (tuple, optional): (x_val, y_val), used instead of validation_split.
            shuffle (bool): reshuffle array samples every epoch (ggrad's seeded generator); batches
                from an iterable come in its own order.
            callbacks (list of Callback): called at train/epoch/batch boundaries.
            verbose (int): 0 silent, 1 a progress bar per epoch, 2 one line per epoch. Default: 1.
            initial_epoch (int): epoch to start at (to resume). Default: 0.
            max_steps (int, optional): stop after this many batches in all.

        Returns:
            History: `history.history` maps "loss", each metric, "val_loss" and each "val_<metric>"
            to a list with one float per epoch.
        """
        self._require_compiled("fit")
        check_positive_int(batch_size, "batch_size", "fit")
        check_positive_int(epochs, "epochs", "fit", allow_zero=True)
        if max_steps is not None:
            check_positive_int(max_steps, "max_steps", "fit")
        if not 0.0 <= validation_split < 1.0:
            raise ValueError(f"fit: validation_split must be in [0, 1), got {validation_split}")
        if validation_data is not None and (not isinstance(validation_data, (tuple, list)) or
                                            len(validation_data) != 2):
            raise ValueError("fit: validation_data must be a pair (x_val, y_val)")
        if is_batches(x, y):
            if validation_split > 0:
                raise ValueError("fit: validation_split needs arrays x and y; pass validation_data with batches")
        else:
            x = self._features(x, "fit")
            y = self._targets(x, y, "fit")
            if validation_split > 0 and validation_data is None:
                x, y, validation_data = _split_off(x, y, validation_split)
        batches, n_batches, n_samples = self._source(x, y, batch_size, "fit")
        val = None
        if validation_data is not None:
            val = self._source(validation_data[0], validation_data[1], batch_size, "fit (validation_data)")
        history = History()
        history.params = {"epochs": epochs, "batch_size": batch_size, "samples": n_samples, "steps": n_batches,
                          "verbose": verbose}
        net = self._net()
        cbs = CallbackList(list(callbacks or []) + [history], self, net)   # last: it sees what the others add
        realize(self._device())  # materialize the parameters once, before the first step
        train_step = self._step_for_fit()
        self.stop_training = False
        steps = 0
        cbs.on_train_begin({})
        for epoch in range(initial_epoch, epochs):
            logs = {}
            cbs.on_epoch_begin(epoch, logs)
            net.train()
            tracker = Tracker(self._compiled["metrics"])
            bar = progress_bar(n_batches, f"Epoch {epoch + 1}/{epochs}", verbose == 1)
            done = 0
            for b, (xb, yb) in enumerate(batches(shuffle)):
                cbs.on_batch_begin(b, {})
                loss, metrics = train_step(xb, yb)
                tracker.add(loss, metrics, len(xb))
                cbs.on_batch_end(b, {"batch": b, "size": len(xb), "loss": detached(loss)})
                done, steps = done + 1, steps + 1
                finished = self.stop_training or steps == max_steps
                advance(bar, tracker, finished or b == (n_batches or 0) - 1)
                if finished:
                    break
            if done == 0:
                raise ValueError(f"fit: the data gave no batches in epoch {epoch + 1} (an iterator is used up "
                                 "after one pass: pass a list or a DataLoader for several epochs)")
            logs.update(tracker.result())
            if val is not None:
                for key, value in self._evaluate(*val[:2], None).items():
                    logs["val_" + key] = value
            if bar is not None:
                bar.set_postfix(format_logs(logs), refresh=True)
                bar.close()
            cbs.on_epoch_end(epoch, logs)
            if verbose == 2:
                print(f"Epoch {epoch + 1}/{epochs} - " + " - ".join(f"{k}: {v:.4f}" for k, v in logs.items()))
            if self.stop_training or steps == max_steps:
                break
        cbs.on_train_end({})
        self.history = history
        return history

    def evaluate(self, x, y=None, batch_size=32, verbose=1):
        """The loss and metrics over (x, y), or over an iterable of (x, y) batches, in evaluation mode.

        Returns a dict {"loss": ..., metric: ...}.
        """
        self._require_compiled("evaluate")
        check_positive_int(batch_size, "batch_size", "evaluate")
        batches, n_batches, _ = self._source(x, y, batch_size, "evaluate")
        bar = progress_bar(n_batches, "Evaluate", verbose == 1)
        result = self._evaluate(batches, n_batches, bar)
        if bar is not None:
            bar.set_postfix(format_logs(result), refresh=True)
            bar.close()
        return result

    def _evaluate(self, batches, n_batches, bar):
        net, device = self._net(), self._device()
        was_training = net.training
        net.eval()
        tracker = Tracker(self._compiled["metrics"])
        try:
            with no_grad():
                for b, (xb, yb) in enumerate(batches(False)):
                    out = net(self._on_device(xb, device))
                    loss, metrics = self._batch_values(out, self._target_for(yb, out, device))
                    tracker.add(loss, metrics, len(xb))
                    realize(device)
                    advance(bar, tracker, b == (n_batches or 0) - 1)
        finally:
            net.train(was_training)
        return tracker.result()

    def predict(self, x, batch_size=32, verbose=0):
        """The model's outputs for x in evaluation mode, as one numpy array (batched; no gradients)."""
        check_positive_int(batch_size, "batch_size", "predict")
        x = self._features(x, "predict")
        net, device = self._net(), self._device()
        n_batches = -(-len(x) // batch_size)
        bar = progress_bar(n_batches, "Predict", verbose == 1)
        was_training = net.training
        net.eval()
        outs = []
        try:
            with no_grad():
                for b in range(n_batches):
                    outs.append(net(tensor(x[b * batch_size:(b + 1) * batch_size], device=device)).numpy())
                    if bar is not None:
                        bar.update(1)
        finally:
            net.train(was_training)
            if bar is not None:
                bar.close()
        return np.concatenate(outs, axis=0)


def _split_off(x, y, fraction):
    """(x_train, y_train, (x_val, y_val)): the last `fraction` of the samples held out."""
    n_val = int(len(x) * fraction)
    if n_val == 0 or n_val == len(x):
        raise ValueError(f"fit: validation_split={fraction} of {len(x)} samples leaves "
                         f"{n_val} for validation and {len(x) - n_val} for training; both must be > 0")
    return x[:-n_val], y[:-n_val], (x[-n_val:], y[-n_val:])
