"""`Sequential`: PyTorch's container of layers run in order, with a Keras-like training API on top.

    model = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 3))
    model.compile(optimizer="adamw", loss="cross_entropy", metrics=["accuracy"], lr=1e-2)
    history = model.fit(x, y, epochs=10, batch_size=64, validation_split=0.2)
    probs = ggrad.softmax(ggrad.tensor(model.predict(x_new)), -1)

`loss="cross_entropy"` takes LOGITS (it applies log_softmax itself, as PyTorch's does): do not end
the model with a Softmax. Each training batch (forward, loss, backward, optimizer step) is one GGML
graph compute; losses and metrics stay on the device and are read only when the progress bar
refreshes and at the end of an epoch.
"""

import json
import warnings
from collections import OrderedDict

import numpy as np

from .. import ggml
from ..autograd import Tensor, no_grad, ops, realize
from ..autograd.factory import generator, tensor, zeros
from . import utils  # noqa: F401  (makes ggrad.nn.utils reachable as an attribute)
from .callbacks import CallbackList, History
from .activation import Softmax
from .linear import Linear
from .sparse import Embedding
from .module import Module
from .architecture import build_layer, layer_config, record_config
from .fit_logs import METRICS, Tracker, advance, format_logs, progress_bar

FORMAT = "ggrad.Sequential"
VERSION = 1

_LOSSES = {
    "cross_entropy": ops.cross_entropy, "nll": ops.nll_loss, "mse": ops.mse_loss, "mae": ops.l1_loss,
    "l1": ops.l1_loss, "huber": ops.huber_loss, "smooth_l1": ops.smooth_l1_loss,
    "bce_with_logits": ops.binary_cross_entropy_with_logits, "bce": ops.binary_cross_entropy,
}
_CLASS_INDEX_LOSSES = ("cross_entropy", "nll")


class Sequential(Module):
    """Modules called one after another: `Sequential(*layers)` or `Sequential(OrderedDict(name=layer))`.

    As in PyTorch: indexing (an int gives a layer, a slice a new Sequential), `len`, iteration,
    `append`, `extend`, `insert`, `pop`, `+`. As in Keras: `compile`, `fit`, `evaluate`, `predict`,
    `summary`, `save` / `Sequential.load`.

    y = layers[-1](... layers[1](layers[0](x)))
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], (OrderedDict, dict)):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)
        self.optimizer = None
        self.stop_training = False
        self._compiled = None

    # ---- the PyTorch container -------------------------------------------------------------------
    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"Sequential: {type(module).__name__} is not a Module subclass")
        super().add_module(name, module)
        if module is not None:
            record_config(module)  # now: the constructor arguments as the layer holds them

    def _index(self, idx):
        n = len(self)
        if not isinstance(idx, (int, np.integer)) or isinstance(idx, bool):
            raise TypeError(f"Sequential indices must be integers or slices, not {type(idx).__name__}")
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range for a Sequential of length {n}")
        return list(self._modules)[idx % n]

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._index(idx)]

    def __setitem__(self, idx, module):
        if not isinstance(module, Module):
            raise TypeError(f"Sequential: {type(module).__name__} is not a Module subclass")
        self._modules[self._index(idx)] = module   # in place: the layer keeps its position
        record_config(module)

    def __delitem__(self, idx):
        keys = list(self._modules)[idx] if isinstance(idx, slice) else [self._index(idx)]
        for key in keys:
            del self._modules[key]
        self._renumber()

    def _renumber(self):
        items = list(self._modules.values())
        self._modules.clear()
        for i, module in enumerate(items):
            self._modules[str(i)] = module

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise TypeError(f"can only add a Sequential to a Sequential, not {type(other).__name__}")
        return Sequential(*self, *other)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for module in modules:
            self.append(module)
        return self

    def insert(self, index, module):
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"insert: index {index} is out of range for a Sequential of length {n}")
        items = list(self._modules.values())
        items.insert(index % (n + 1) if index < 0 else index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)
        return self

    def pop(self, idx=-1):
        module = self[idx]
        del self[idx]
        return module

    def forward(self, x):
        for module in self:
            x = module(x)
        return x

    # ---- Keras: compile ----------------------------------------------------------------------------
    def compile(self, optimizer="adamw", loss="cross_entropy", metrics=None, lr=None, clipnorm=None):
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
        """
        from .. import optim
        if isinstance(loss, str):
            if loss not in _LOSSES:
                raise ValueError(f"compile: unknown loss {loss!r}; expected one of {sorted(_LOSSES)} or a callable")
            loss_fn = _LOSSES[loss]
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
        params = list(self.parameters())
        if isinstance(optimizer, optim.Optimizer):
            opt = optimizer
            if lr is not None:
                for group in opt.param_groups:
                    group["lr"] = lr
        elif isinstance(optimizer, str):
            if not params:
                raise ValueError("compile: the model has no parameters to optimize")
            name = optimizer.lower()
            if name == "adamw":
                opt = optim.AdamW(params, lr=1e-3 if lr is None else lr)
            elif name == "adam":
                opt = optim.AdamW(params, lr=1e-3 if lr is None else lr, weight_decay=0.0)
            elif name == "sgd":
                opt = optim.SGD(params, lr=1e-2 if lr is None else lr)
            else:
                raise ValueError(f"compile: unknown optimizer {optimizer!r}; expected 'adamw', 'adam', 'sgd' or an "
                                 "Optimizer")
        else:
            raise ValueError(f"compile: optimizer must be a name or an Optimizer, got {type(optimizer).__name__}")
        if loss == "cross_entropy" and len(self) and isinstance(self[-1], Softmax):
            warnings.warn("compile: loss='cross_entropy' takes logits, but the model ends with a Softmax, so it "
                          "is trained on softmax(softmax(x)); remove the final Softmax layer (apply softmax to "
                          "predict()'s output when you need probabilities)", UserWarning, stacklevel=2)
        self.optimizer = opt
        self._compiled = {
            "loss_name": loss if isinstance(loss, str) else None, "loss": loss_fn, "metrics": metric_fns,
            "clipnorm": clipnorm,
            "config": {"optimizer": optimizer if isinstance(optimizer, str) else None,
                       "loss": loss if isinstance(loss, str) else None,
                       "metrics": [m for m in metrics or [] if isinstance(m, str)], "lr": lr, "clipnorm": clipnorm},
        }

    # ---- Keras: data -------------------------------------------------------------------------------
    def _device(self):
        for p in self.parameters():
            return p.device
        return ggml.device(None)

    def _first(self, kind):
        """The first (or, kind='last', last) Linear layer, looking inside nested Sequentials."""
        linears = [m for m in self.modules() if isinstance(m, Linear)]
        if not linears:
            return None
        return linears[0] if kind == "first" else linears[-1]

    def _features(self, x, op):
        x = _as_numpy(x, "x", op)
        if x.ndim == 0 or len(x) == 0:
            raise ValueError(f"{op}: x must hold at least one sample, got shape {x.shape}")
        first = self._first("first")
        if first is not None and self[0] is first and (x.ndim < 2 or x.shape[-1] != first.in_features):
            raise ValueError(f"{op}: x has shape {x.shape}, but the first layer is Linear(in_features="
                             f"{first.in_features}): expected (n_samples, {first.in_features})")
        return x.astype(np.float32) if x.dtype.kind == "f" else x

    def _targets(self, x, y, op):
        y = _as_numpy(y, "y", op)
        if y.ndim == 0 or len(y) != len(x):
            raise ValueError(f"{op}: x and y have different numbers of samples: {len(x)} and "
                             f"{len(y) if y.ndim else 'a scalar'}")
        if self._compiled["loss_name"] in _CLASS_INDEX_LOSSES and y.ndim == 1:
            if y.dtype.kind == "f":
                if not np.all(np.isfinite(y)) or not np.all(y == np.round(y)):
                    raise ValueError(f"{op}: loss {self._compiled['loss_name']!r} needs integer class indices in y "
                                     f"(or probabilities of shape (n, classes)), got non-integer values")
            y = y.astype(np.int32)
            last = self._first("last")
            if last is not None and self[-1] is last and len(y) and (y.min() < 0 or y.max() >= last.out_features):
                raise ValueError(f"{op}: class indices in y must lie in [0, {last.out_features}) for a model "
                                 f"with {last.out_features} outputs; got values in [{y.min()}, {y.max()}]")
            return y
        return y.astype(np.float32) if y.dtype.kind in "fb" or self._compiled["loss_name"] else y

    def _require_compiled(self, op):
        if self._compiled is None:
            raise RuntimeError(f"{op}: the model is not compiled; call model.compile(optimizer=..., loss=...) first")

    def _batch(self, array, idx, device):
        return tensor(array[idx], device=device)

    def _target_for(self, y_batch, out, device):
        """The target batch as a Tensor, reshaped to the output's shape for elementwise losses."""
        if y_batch.dtype.kind == "f" and y_batch.shape != out.shape and y_batch.size == out.numel():
            y_batch = y_batch.reshape(out.shape)
        return tensor(y_batch, device=device)

    def _batch_values(self, out, yb):
        """(loss, [(sum, count) per metric]) of one batch, as pending tensors."""
        c = self._compiled
        loss = c["loss"](out, yb)
        with no_grad():
            detached = out.detach()
            metrics = []
            for _, fn, builtin in c["metrics"]:
                if builtin:
                    metrics.append(fn(detached, yb))
                else:
                    metrics.append((fn(detached, yb), None))
        return loss, metrics

    # ---- Keras: fit / evaluate / predict -----------------------------------------------------------
    def fit(self, x, y, epochs=1, batch_size=32, validation_split=0.0, validation_data=None, shuffle=True,
            callbacks=None, verbose=1, initial_epoch=0):
        """Train for `epochs` passes over (x, y) in shuffled mini-batches; returns a `History`.

        Args:
            x: inputs (numpy array or Tensor), samples along the first dimension.
            y: targets: class indices for "cross_entropy"/"nll", values for regression losses.
            epochs (int): number of passes. Default: 1.
            batch_size (int): samples per step; the last, partial batch is used. Default: 32.
            validation_split (float): fraction of the samples, taken from the END of x and y before
                shuffling, held out to compute val_loss and val_metrics each epoch. Default: 0.
            validation_data (tuple, optional): (x_val, y_val), used instead of validation_split.
            shuffle (bool): reshuffle the training samples every epoch (ggrad's seeded generator).
            callbacks (list of Callback): called at train/epoch/batch boundaries.
            verbose (int): 0 silent, 1 a progress bar per epoch, 2 one line per epoch. Default: 1.
            initial_epoch (int): epoch to start at (to resume). Default: 0.

        Returns:
            History: `history.history` maps "loss", each metric, "val_loss" and each "val_<metric>"
            to a list with one float per epoch.
        """
        self._require_compiled("fit")
        _check_positive_int(batch_size, "batch_size", "fit")
        _check_positive_int(epochs, "epochs", "fit", allow_zero=True)
        if not 0.0 <= validation_split < 1.0:
            raise ValueError(f"fit: validation_split must be in [0, 1), got {validation_split}")
        x = self._features(x, "fit")
        y = self._targets(x, y, "fit")
        val = None
        if validation_data is not None:
            if not isinstance(validation_data, (tuple, list)) or len(validation_data) != 2:
                raise ValueError("fit: validation_data must be a pair (x_val, y_val)")
            vx = self._features(validation_data[0], "fit (validation_data)")
            val = (vx, self._targets(vx, validation_data[1], "fit (validation_data)"))
        elif validation_split > 0:
            n_val = int(len(x) * validation_split)
            if n_val == 0 or n_val == len(x):
                raise ValueError(f"fit: validation_split={validation_split} of {len(x)} samples leaves "
                                 f"{n_val} for validation and {len(x) - n_val} for training; both must be > 0")
            x, val = x[:-n_val], (x[-n_val:], y[-n_val:])
            y = y[:-n_val]
        history = History()
        history.params = {"epochs": epochs, "batch_size": batch_size, "samples": len(x), "verbose": verbose}
        cbs = CallbackList(list(callbacks or []) + [history], self)   # last: it sees what the others add
        device = self._device()
        realize(device)  # materialize the parameters once, before the first step
        self.stop_training = False
        cbs.on_train_begin({})
        n = len(x)
        n_batches = -(-n // batch_size)
        for epoch in range(initial_epoch, epochs):
            logs = {}
            cbs.on_epoch_begin(epoch, logs)
            self.train()
            order = generator().permutation(n) if shuffle else np.arange(n)
            tracker = Tracker(self._compiled["metrics"])
            bar = progress_bar(n_batches, f"Epoch {epoch + 1}/{epochs}", verbose == 1)
            for b in range(n_batches):
                idx = order[b * batch_size:(b + 1) * batch_size]
                cbs.on_batch_begin(b, {})
                self.optimizer.zero_grad()
                out = self(self._batch(x, idx, device))
                loss, metrics = self._batch_values(out, self._target_for(y[idx], out, device))
                loss.backward()
                if self._compiled["clipnorm"] is not None:
                    utils.clip_grad_norm_(self.parameters(), self._compiled["clipnorm"])
                tracker.add(loss, metrics, len(idx))
                self.optimizer.step()  # forward, backward and update: one graph
                cbs.on_batch_end(b, {"batch": b, "size": len(idx), "loss": loss.detach()})
                advance(bar, tracker, b == n_batches - 1)
            logs.update(tracker.result())
            if val is not None:
                for key, value in self._evaluate(val[0], val[1], batch_size, None).items():
                    logs["val_" + key] = value
            if bar is not None:
                bar.set_postfix(format_logs(logs), refresh=True)
                bar.close()
            cbs.on_epoch_end(epoch, logs)
            if verbose == 2:
                print(f"Epoch {epoch + 1}/{epochs} - " + " - ".join(f"{k}: {v:.4f}" for k, v in logs.items()))
            if self.stop_training:
                break
        cbs.on_train_end({})
        self.history = history
        return history

    def evaluate(self, x, y, batch_size=32, verbose=1):
        """The loss and metrics over (x, y) in evaluation mode; returns a dict {"loss": ..., metric: ...}."""
        self._require_compiled("evaluate")
        _check_positive_int(batch_size, "batch_size", "evaluate")
        x = self._features(x, "evaluate")
        y = self._targets(x, y, "evaluate")
        bar = progress_bar(-(-len(x) // batch_size), "Evaluate", verbose == 1)
        result = self._evaluate(x, y, batch_size, bar)
        if bar is not None:
            bar.set_postfix(format_logs(result), refresh=True)
            bar.close()
        return result

    def _evaluate(self, x, y, batch_size, bar):
        device = self._device()
        was_training = self.training
        self.eval()
        tracker = Tracker(self._compiled["metrics"])
        n_batches = -(-len(x) // batch_size)
        try:
            with no_grad():
                for b in range(n_batches):
                    idx = slice(b * batch_size, (b + 1) * batch_size)
                    out = self(self._batch(x, idx, device))
                    loss, metrics = self._batch_values(out, self._target_for(y[idx], out, device))
                    tracker.add(loss, metrics, len(x[idx]))
                    realize(device)
                    advance(bar, tracker, b == n_batches - 1)
        finally:
            self.train(was_training)
        return tracker.result()

    def predict(self, x, batch_size=32, verbose=0):
        """The model's outputs for x in evaluation mode, as one numpy array (batched; no gradients)."""
        _check_positive_int(batch_size, "batch_size", "predict")
        x = self._features(x, "predict")
        device = self._device()
        n_batches = -(-len(x) // batch_size)
        bar = progress_bar(n_batches, "Predict", verbose == 1)
        was_training = self.training
        self.eval()
        outs = []
        try:
            with no_grad():
                for b in range(n_batches):
                    outs.append(self(self._batch(x, slice(b * batch_size, (b + 1) * batch_size), device)).numpy())
                    if bar is not None:
                        bar.update(1)
        finally:
            self.train(was_training)
            if bar is not None:
                bar.close()
        return np.concatenate(outs, axis=0)

    # ---- Keras: summary, save, load ----------------------------------------------------------------
    def summary(self, input_shape=None, print_fn=print):
        """A table of the layers, their output shapes and parameter counts; printed and returned.

        Output shapes need the input's shape (without the batch dimension): `input_shape`, or the
        first Linear's in_features. They are worked out without computing anything.
        """
        if input_shape is None:
            first = self._first("first")
            input_shape = (first.in_features,) if first is not None and self[0] is first else None
        shapes = self._output_shapes(tuple(input_shape)) if input_shape is not None else None
        rows = []
        for i, (name, layer) in enumerate(self._modules.items()):
            count = sum(p.numel() for p in layer.parameters())
            shape = "?" if shapes is None else "(None, " + ", ".join(str(s) for s in shapes[i]) + ")"
            rows.append((f"{name} ({type(layer).__name__})", shape.replace(", )", ")"), f"{count:,}"))
        total = sum(p.numel() for p in self.parameters())
        trainable = sum(p.numel() for p in self.parameters() if p.requires_grad)
        w0 = max([len("Layer (type)")] + [len(r[0]) for r in rows]) + 2
        w1 = max([len("Output Shape")] + [len(r[1]) for r in rows]) + 2
        w2 = max([len("Param #")] + [len(r[2]) for r in rows])
        rule = "-" * (w0 + w1 + w2)
        lines = ['Model: "sequential"', rule, f"{'Layer (type)':<{w0}}{'Output Shape':<{w1}}{'Param #':>{w2}}",
                 "=" * (w0 + w1 + w2)]
        lines += [f"{a:<{w0}}{b:<{w1}}{c:>{w2}}" for a, b, c in rows]
        lines += ["=" * (w0 + w1 + w2), f"Total params: {total:,}", f"Trainable params: {trainable:,}",
                  f"Non-trainable params: {total - trainable:,}", rule]
        text = "\n".join(lines)
        if print_fn is not None:
            print_fn(text)
        return text

    def _output_shapes(self, input_shape):
        """Each layer's output shape (batch dimension dropped), from a lazy forward pass never computed."""
        was_training = self.training
        self.eval()
        shapes = []
        try:
            with no_grad():
                dtype = ggml.i32 if isinstance(self[0], Embedding) else ggml.f32
                x = zeros((1,) + input_shape, dtype=dtype, device=self._device())
                for layer in self:
                    x = layer(x)
                    shapes.append(tuple(x.shape[1:]))
        finally:
            self.train(was_training)
        return shapes

    def get_config(self):
        """The architecture: each layer's class and constructor arguments (JSON-able)."""
        return {"layers": [dict(name=name, **layer_config(layer)) for name, layer in self._modules.items()]}

    def save(self, path, include_optimizer=True):
        """Write the architecture (JSON), the weights and the compile settings to `path`, atomically.

        Load it with `Sequential.load(path)`. The optimizer's state is included when the model was
        compiled with an optimizer name (so `fit` resumes where it stopped).
        """
        from ..serialization import save
        blob = {"format": FORMAT, "version": VERSION, "architecture": json.dumps(self.get_config()),
                "state_dict": dict(self.state_dict())}
        if self._compiled is not None and self._compiled["config"]["optimizer"] is not None:
            blob["compile"] = json.dumps(self._compiled["config"])
            if include_optimizer:
                blob["optimizer"] = self.optimizer.state_dict()
        save(blob, path)

    @classmethod
    def load(cls, path, custom_objects=None, device=None):
        """A model saved by `save()`: rebuilt from its architecture, weights loaded, compiled again if it was.

        Args:
            path: the file.
            custom_objects (dict, optional): layer classes by name, for layers outside ggrad.nn.
            device (optional): where to put the parameters (default: the CPU).
        """
        from ..serialization import load
        blob = load(path, map_location=device)
        if not isinstance(blob, dict) or blob.get("format") != FORMAT:
            raise ValueError(f"Sequential.load: {path} is not a saved ggrad Sequential model")
        config = json.loads(blob["architecture"])
        model = cls._from_config(config, custom_objects or {})
        if device is not None:
            model.to(device)
        model.load_state_dict(blob["state_dict"])
        if "compile" in blob:
            settings = json.loads(blob["compile"])
            model.compile(optimizer=settings["optimizer"], loss=settings["loss"], metrics=settings["metrics"],
                          lr=settings["lr"], clipnorm=settings["clipnorm"])
            if "optimizer" in blob:
                model.optimizer.load_state_dict(blob["optimizer"])
        return model

    @classmethod
    def _from_config(cls, config, custom_objects):
        model = cls()
        for entry in config["layers"]:
            if entry["class"] == "Sequential" and "layers" in entry:
                layer = Sequential._from_config(entry, custom_objects)
            else:
                layer = build_layer(entry, custom_objects)
            model.add_module(entry["name"], layer)
        return model


def _as_numpy(a, name, op):
    if a is None:
        raise ValueError(f"{op}: {name} is None")
    if isinstance(a, Tensor):
        return a.detach().numpy()
    try:
        return np.asarray(a)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{op}: {name} must be a numpy array or a Tensor: {err}") from None


def _check_positive_int(value, name, op, allow_zero=False):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < (0 if allow_zero else 1):
        raise ValueError(f"{op}: {name} must be a {'non-negative' if allow_zero else 'positive'} int, got {value!r}")
