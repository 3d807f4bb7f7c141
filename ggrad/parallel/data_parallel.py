"""Data-parallel training: one replica per device, each batch split across them, gradients averaged.

Each step builds every replica's forward and backward in Python (cheap), then computes the devices'
graphs AT ONCE in threads (GGML runs without the GIL), averages the gradients in one bucket per
device (one download, one upload each), and applies the same optimizer update on every replica, so
the replicas stay identical. Devices can be local (CPU, CUDA, Vulkan) or other hosts' devices
joined through GGML's RPC backend (`ggrad.ggml.rpc_add_server`).
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from tqdm import tqdm

from .. import ggml
from ..autograd import execution, no_grad
from ..autograd.factory import generator, tensor
from ..autograd.ops import cat, reshape


def split_sizes(n, parts):
    """Sizes of `parts` nearly equal consecutive shards of n items (the first ones one larger)."""
    if n < parts:
        raise ValueError(f"a batch of {n} cannot be split across {parts} devices")
    base, extra = divmod(n, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


class DataParallel:
    """Replicas of `model_fn()` on `devices`, trained in lock step.

    Args:
        model_fn: builds a fresh model (called once per device; replica 0's weights are copied to all).
        devices: device names or Devices, all different (e.g. ["cpu", "rpc:0"] or ["cuda:0", "cuda:1"]).
        optimizer_fn: `optimizer_fn(parameters)` -> an optimizer, one per replica.
    """

    def __init__(self, model_fn, devices, optimizer_fn):
        self.devices = [ggml.device(d) for d in devices]
        if len({d.name for d in self.devices}) != len(self.devices):
            raise ValueError(f"DataParallel: devices must be distinct, got {[d.name for d in self.devices]}")
        if not self.devices:
            raise ValueError("DataParallel: at least one device is needed")
        first = model_fn()
        state = first.state_dict()
        self.replicas = []
        for dev in self.devices:
            replica = first if not self.replicas else model_fn()
            if replica is not first:
                replica.load_state_dict(state)
            self.replicas.append(replica.to(dev))
        self.optimizers = [optimizer_fn(list(r.parameters())) for r in self.replicas]
        self._pool = ThreadPoolExecutor(max_workers=len(self.devices))

    @property
    def module(self):
        """Replica 0 (all replicas hold the same weights)."""
        return self.replicas[0]

    def train(self, mode=True):
        for r in self.replicas:
            r.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def _compute_all(self):
        """Compute every device's pending graph at the same time."""
        list(self._pool.map(execution.realize, self.devices))

    def step(self, x, y, loss_fn):
        """One training step on a batch (numpy arrays): returns the batch's mean loss as a float."""
        x, y = np.asarray(x), np.asarray(y)
        if len(x) != len(y):
            raise ValueError(f"DataParallel.step: {len(x)} inputs but {len(y)} targets")
        sizes = split_sizes(len(x), len(self.devices))
        bounds = np.cumsum([0] + sizes)
        losses, buckets = [], []
        for i, (replica, opt, dev) in enumerate(zip(self.replicas, self.optimizers, self.devices)):
            xs, ys = x[bounds[i]:bounds[i + 1]], y[bounds[i]:bounds[i + 1]]
            loss = loss_fn(replica(tensor(xs, device=dev)), tensor(ys, device=dev))
            opt.zero_grad()
            loss.backward()
            losses.append(loss)
            buckets.append(self._bucket(replica, sizes[i] / len(x)))
        self._compute_all()
        total = sum(b.numpy().astype(np.float64) for b in buckets).astype(np.float32)
        for replica, opt, dev in zip(self.replicas, self.optimizers, self.devices):
            self._unbucket(replica, tensor(total, device=dev))
            opt.step()
        return float(sum(l.item() * s for l, s in zip(losses, sizes)) / len(x))

    @staticmethod
    def _bucket(replica, weight):
        """All of a replica's gradients, scaled by its share of the batch, as one flat pending tensor."""
        with no_grad():
            flat = [reshape(p.grad.float(), p.numel()) * weight for p in replica.parameters() if p.grad is not None]
            return cat(flat, 0)

    @staticmethod
    def _unbucket(replica, total):
        """Give each parameter its slice of the averaged bucket as its gradient."""
        offset = 0
        with no_grad():
            for p in replica.parameters():
                if p.grad is None:
                    continue
                n = p.numel()
                p.grad = reshape(total[offset:offset + n], p.shape).to(p.grad.dtype)
                offset += n

    def close(self):
        self._pool.shutdown(wait=True)


def dp_train(model_fn, optimizer_fn, loss_fn, x, y, devices, epochs=1, batch_size=64, shuffle=True, verbose=1):
    """Train `model_fn()` data-parallel on `devices`; returns (model, per-epoch mean losses).

    Every batch of `batch_size` examples is split across the devices, whose graphs run at once.
    """
    dp = DataParallel(model_fn, devices, optimizer_fn)
    x, y = np.asarray(x), np.asarray(y)
    if len(x) != len(y):
        raise ValueError(f"dp_train: {len(x)} inputs but {len(y)} targets")
    history = []
    try:
        for epoch in range(epochs):
            order = generator().permutation(len(x)) if shuffle else np.arange(len(x))
            starts = range(0, len(x), batch_size)
            bar = tqdm(starts, desc=f"epoch {epoch + 1}/{epochs}", disable=not verbose, leave=False)
            total, count = 0.0, 0
            for s in bar:
                idx = order[s:s + batch_size]
                if len(idx) < len(dp.devices):
                    continue
                total += dp.step(x[idx], y[idx], loss_fn) * len(idx)
                count += len(idx)
                bar.set_postfix(loss=f"{total / count:.4f}")
            history.append(total / max(count, 1))
            if verbose:
                print(f"epoch {epoch + 1}/{epochs}: loss {history[-1]:.4f}")
    finally:
        dp.close()
    return dp.module, history
