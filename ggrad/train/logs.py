"""What `Trainer.fit/evaluate` report: metric functions, per-batch value tracking, progress bars.

A metric returns (sum over the batch, count) as device tensors, so nothing is read from the device
until a bar refreshes (about twice a second) or an epoch ends.
"""

import time

from tqdm.auto import tqdm

from ..autograd import Tensor


def _accuracy(out, y):
    """Correct predictions: argmax of logits vs class indices (or one-hot rows); sign of a single logit."""
    if out.ndim >= 2 and out.shape[-1] > 1:
        pred = out.argmax(-1)
        target = y.argmax(-1) if y.dtype.is_float and y.shape == out.shape else y
        return pred.eq(target.to(pred.dtype)).sum(), pred.numel()
    return _binary_accuracy(out, y)


def _binary_accuracy(out, y):
    return (out > 0.0).eq(y > 0.5).sum(), out.numel()


def _mae(out, y):
    return (out - y).abs().sum(), out.numel()


def _mse(out, y):
    d = out - y
    return (d * d).sum(), out.numel()


METRICS = {"accuracy": _accuracy, "acc": _accuracy, "binary_accuracy": _binary_accuracy, "mae": _mae,
            "mse": _mse}


class Tracker:
    """Per-batch loss and metric tensors, summed on the host only when read (`flush`)."""

    def __init__(self, metric_fns):
        self.names = ["loss"] + [name for name, _, _ in metric_fns]
        self.pending = []
        self.sums = [0.0] * len(self.names)
        self.counts = [0] * len(self.names)

    def add(self, loss, metrics, size):
        """One batch: its mean loss (a Tensor or a float), [(value, count or None for a mean)] per metric."""
        self.pending.append((size, [(detached(loss), None)] + metrics))

    def flush(self):
        for size, values in self.pending:
            for i, (value, count) in enumerate(values):
                v = float(value.item()) if isinstance(value, Tensor) else float(value)
                if count is None:  # a batch mean: weigh it by the batch size
                    self.sums[i] += v * size
                    self.counts[i] += size
                else:
                    self.sums[i] += v
                    self.counts[i] += count
        self.pending = []

    def result(self):
        self.flush()
        return {name: (s / c if c else float("nan")) for name, s, c in zip(self.names, self.sums, self.counts)}


def detached(value):
    """A Tensor without its graph (other values as they are)."""
    return value.detach() if isinstance(value, Tensor) else value


def progress_bar(total, desc, enabled):
    if not enabled:
        return None
    bar = tqdm(total=total, desc=desc, unit="batch", dynamic_ncols=True, leave=True)
    bar._ggrad_last_read = time.monotonic()
    return bar


def advance(bar, tracker, last):
    """One batch done: update the bar; read the pending values only about twice a second."""
    if bar is None:
        return
    now = time.monotonic()
    if last or now - bar._ggrad_last_read > 0.5:
        bar._ggrad_last_read = now
        bar.set_postfix(format_logs(tracker.result()), refresh=False)
    bar.update(1)


def format_logs(logs):
    return {k: f"{v:.4f}" for k, v in logs.items()}
