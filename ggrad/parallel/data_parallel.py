"""Data-parallel training: one replica per device, each batch split across them, gradients averaged.

Each step records every replica's forward and backward in Python, in device order, and hands each
device's graph to a thread of its own as soon as it is recorded: that device computes (GGML runs
without the GIL) while the next replica records. Each replica's gradients, scaled by its share of
the batch, are joined into flat float32 buckets of whole parameters (`bucket_mb` each at most).
The buckets are all-reduced on the devices (device_reduce.py): each replica's thread pulls its
peers' buckets onto its device with GGML's copies (peer copies between GPUs, no host round trip) as
soon as each peer has computed, sums them in device order inside its update graph, clips when asked,
and applies the optimizer update. Every replica adds the same values in the same order, so the
replicas stay bitwise identical. Devices can be local (CPU, CUDA, Vulkan) or other hosts' devices
joined through GGML's RPC backend (`ggrad.ggml.rpc_add_server`), which GGML copies through the host.
A subclass whose reduction needs the buckets in host memory (MPI across processes:
ggrad.distributed) sets `reduce_on_devices = False`: the buckets are then read, summed on the host in
float64 (in device order), passed to `reduce`, and the sum uploaded to every replica.

`timings` holds the last step's consecutive spans: record (until the last replica is recorded; the
first devices compute meanwhile), compute (until every replica has computed), reduce (until every
copy between devices is done, and the clipping factor computed; on the host path: the host sum,
`reduce` and clipping), update (the sums and the updates' computes); `step` is their sum.
`reduce_bytes` holds the bytes the last step copied between devices, all replicas together, and
`copy_seconds` the longest time one replica's thread spent copying them (copies that overlap a
slower peer's compute are inside the compute span).
"""

import contextvars
import math
import time
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

from .. import ggml, nn
from ..autograd import execution, no_grad
from ..autograd.device_copy import copy_to_device
from ..autograd.factory import tensor
from ..autograd.ops import cat, reshape, split
from ..optim import Optimizer
from .device_reduce import bucket_ranges, pulled, summed
from .replicas import check_optimizer_covers, replicate_module, replicate_optimizer, sync_hyperparameters


def shard_sizes(n, weights):
    """Sizes of consecutive shards of n items in proportion to `weights` (largest remainders first; ties
    to the earlier shard). Shards may be empty when n is small."""
    w = np.asarray(weights, dtype=np.float64)
    exact = n * w / w.sum()
    sizes = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - sizes), kind="stable")
    sizes[order[:n - int(sizes.sum())]] += 1
    return [int(s) for s in sizes]


def split_sizes(n, parts):
    """Sizes of `parts` nearly equal consecutive shards of n items (the first ones one larger)."""
    if n < parts:
        raise ValueError(f"a batch of {n} cannot be split across {parts} devices")
    return shard_sizes(n, [1] * parts)


def default_devices():
    """Every local GPU, else the CPU (RPC servers' devices only when named)."""
    gpus = [d for d in ggml.devices() if d.kind == "gpu" and d.backend_name != "RPC"]
    return gpus or [ggml.device("cpu")]


def _check_weights(weights, n_devices):
    if weights is None:
        return [1.0] * n_devices
    weights = [float(w) for w in weights]
    if len(weights) != n_devices:
        raise ValueError(f"DataParallel: {len(weights)} shard_weights for {n_devices} devices")
    if not all(math.isfinite(w) and w >= 0 for w in weights) or sum(weights) <= 0:
        raise ValueError(f"DataParallel: shard_weights must be finite, >= 0 and not all 0, got {weights}")
    return weights


class DataParallel:
    """Replicas of a model on `devices`, trained in lock step.

    Args:
        model (Module): replica 0, moved to devices[0] in place; the others are copies of it. The
            older form, a function building a fresh model, is accepted too.
        devices: device names or Devices, all different (e.g. ["cpu", "rpc:0"] or ["cuda:0", "cuda:1"]).
        optimizer (Optimizer): over model's parameters; each other replica gets a copy (same class,
            groups, state). The older form, `optimizer_fn(parameters) -> Optimizer`, is accepted too.
        shard_weights (list of float, optional): each device's share of every batch (default: even).
        bucket_mb (float): the largest gradient bucket, in MiB of float32 (one larger parameter makes a
            bucket of its own). Default: 25, as PyTorch's DDP.
    """

    reduce_on_devices = True   # False: the buckets are summed on the host (and passed to `reduce`)

    def __init__(self, model, devices, optimizer, shard_weights=None, bucket_mb=25.0):
        self.devices = [ggml.device(d) for d in devices]
        if len({d.name for d in self.devices}) != len(self.devices):
            raise ValueError(f"DataParallel: devices must be distinct, got {[d.name for d in self.devices]}")
        if not self.devices:
            raise ValueError("DataParallel: at least one device is needed")
        self.shard_weights = _check_weights(shard_weights, len(self.devices))
        if not (isinstance(bucket_mb, (int, float)) and math.isfinite(bucket_mb) and bucket_mb > 0):
            raise ValueError(f"DataParallel: bucket_mb must be a positive number, got {bucket_mb!r}")
        self.bucket_elems = max(1, int(bucket_mb * 2**20) // 4)
        if not isinstance(model, nn.Module):
            if not callable(model) or not callable(optimizer):
                raise TypeError(f"DataParallel: model must be a Module (or a function building one), got "
                                f"{type(model).__name__}")
            model = model()
            optimizer = optimizer(list(model.parameters()))
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"DataParallel: optimizer must be an Optimizer, got {type(optimizer).__name__}")
        check_optimizer_covers(optimizer, model)
        if any(p.device != self.devices[0] for p in model.parameters()):
            model.to(self.devices[0])
            if optimizer.state:   # its moments follow the parameters
                optimizer.load_state_dict(optimizer.state_dict())
        self.replicas = [model] + [replicate_module(model, dev) for dev in self.devices[1:]]
        self.optimizers = [optimizer] + [replicate_optimizer(optimizer, model, r) for r in self.replicas[1:]]
        self._pool = ThreadPoolExecutor(max_workers=len(self.devices))
        self.timings = {}   # seconds of the last step: record, compute, reduce, update and their sum, step
        self.reduce_bytes = 0   # bytes the last step copied between devices
        self.copy_seconds = 0.0   # the longest time a replica's thread spent copying in the last step

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

    def _submit(self, fn, *args):
        """Run fn(*args) in the thread pool, in a copy of this thread's context (grad mode, autocast)."""
        return self._pool.submit(contextvars.copy_context().run, fn, *args)

    @staticmethod
    def _results(jobs):
        """The jobs' results once all of them are done (the first failure raised only then: no thread of
        this step is still computing when the caller sees it)."""
        wait(jobs)
        return [job.result() for job in jobs]

    def step(self, x, y, loss_fn, max_grad_norm=None):
        """One training step on a batch (numpy arrays or Tensors): returns the batch's mean loss as a float.

        The batch is split by `shard_weights` (a device whose shard is empty computes nothing but
        still applies the update); the averaged gradient's joint 2-norm is clipped to `max_grad_norm`.
        """
        x, y = np.asarray(x), np.asarray(y)
        if len(x) != len(y):
            raise ValueError(f"DataParallel.step: {len(x)} inputs but {len(y)} targets")
        if len(x) == 0:
            raise ValueError("DataParallel.step: the batch is empty")
        return self._step(x, y, loss_fn, max_grad_norm, len(x))

    def _step(self, x, y, loss_fn, max_grad_norm, n_global):
        """The step of this process's part (x, y) of a global batch of `n_global` samples.

        Each shard's gradients are weighted by its share of the global batch, so that the sum over
        every shard (on the devices, or on the host and then `reduce` across processes) is the global
        mean gradient.
        """
        if any(r.training != self.module.training for r in self.replicas):
            self.train(self.module.training)
        sync_hyperparameters(self.optimizers[0], self.optimizers[1:])
        sizes = shard_sizes(len(x), self.shard_weights)
        bounds = np.cumsum([0] + sizes)
        started = time.perf_counter()
        jobs, layout, ranges = [], None, None
        try:
            for i, (replica, opt, dev) in enumerate(zip(self.replicas, self.optimizers, self.devices)):
                opt.zero_grad()
                if sizes[i] == 0:
                    continue
                xs, ys = x[bounds[i]:bounds[i + 1]], y[bounds[i]:bounds[i + 1]]
                loss = loss_fn(replica(tensor(xs, device=dev)), tensor(ys, device=dev))
                loss.backward()
                params = list(replica.parameters())
                with_grad = [j for j, p in enumerate(params) if p.grad is not None]
                if layout is not None and with_grad != layout:
                    raise RuntimeError("DataParallel.step: the replicas' backward passes reached different "
                                       "parameters")
                layout = with_grad
                ranges = bucket_ranges([params[j].numel() for j in layout], self.bucket_elems)
                buckets = self._bucket(replica, layout, ranges, sizes[i] / n_global)
                jobs.append(self._submit(self._compute, dev, buckets, loss, sizes[i]))
        except BaseException:
            wait(jobs)
            raise
        recorded = time.perf_counter()
        if self.reduce_on_devices:
            return self._reduce_on_devices(jobs, layout, ranges, max_grad_norm, n_global, started, recorded)
        results = self._results(jobs)
        computed = time.perf_counter()
        total = sum(bucket.astype(np.float64) for bucket, _ in results)
        loss_sum = sum(loss for _, loss in results) / n_global
        total, loss_sum = self.reduce(total, loss_sum)
        if max_grad_norm is not None:
            norm = float(np.sqrt(np.dot(total, total)))
            total = total * min(1.0, float(max_grad_norm) / (norm + 1e-6))   # as clip_grad_norm_
        total = total.astype(np.float32)
        reduced = time.perf_counter()
        self._results([self._submit(self._upload_update, replica, opt, dev, layout, total)
                       for replica, opt, dev in zip(self.replicas, self.optimizers, self.devices)])
        done = time.perf_counter()
        self.timings = {"step": done - started, "record": recorded - started, "compute": computed - recorded,
                        "reduce": reduced - computed, "update": done - reduced}
        return float(loss_sum)

    def _reduce_on_devices(self, jobs, layout, ranges, max_grad_norm, n_global, started, recorded):
        """The rest of a step whose replicas' computes are `jobs`: pull the buckets between the devices,
        then each replica sums them, clips and updates (device_reduce.py)."""
        pulls = [self._submit(self._pull, jobs, dev) for dev in self.devices]
        wait(jobs)
        computed = time.perf_counter()
        finished = self._results(jobs + pulls)
        results, pulled_parts = finished[:len(jobs)], finished[len(jobs):]
        scale = None
        if max_grad_norm is not None:   # one factor, computed on replica 0 and copied: identical everywhere
            with no_grad():
                totals = [summed(parts) for parts in pulled_parts[0][0]]
                squares = [(t * t).sum() for t in totals]
                norm = summed(squares).sqrt()
                scale = (float(max_grad_norm) / (norm + 1e-6)).clamp(max=1.0)   # as clip_grad_norm_
            execution.realize(self.devices[0])
            pulled_parts[0] = ([[t] for t in totals],) + pulled_parts[0][1:]
        reduced = time.perf_counter()
        self._results([self._submit(self._sum_update, replica, opt, dev, layout, ranges, parts, scale)
                       for replica, opt, dev, (parts, *_) in zip(self.replicas, self.optimizers, self.devices,
                                                                 pulled_parts)])
        done = time.perf_counter()
        self.reduce_bytes = sum(copied for _, copied, _ in pulled_parts)
        self.copy_seconds = max(seconds for *_, seconds in pulled_parts)
        self.timings = {"step": done - started, "record": recorded - started, "compute": computed - recorded,
                        "reduce": reduced - computed, "update": done - reduced}
        return sum(loss for _, loss in results) / n_global

    def _compute(self, device, buckets, loss, size):
        """(In a replica's thread.) Compute the device's graph; its buckets (read into one numpy array, here
        in the replica's thread, when they are summed on the host) and its loss times its shard size."""
        execution.realize(device)
        if not self.reduce_on_devices:
            buckets = np.concatenate([bucket.numpy() for bucket in buckets])
        return buckets, loss.item() * size

    @staticmethod
    def _pull(jobs, device):
        """(In a replica's thread.) Every computing replica's buckets on `device`, each pulled as soon as its
        replica has computed: a list per bucket of the parts in device order, the bytes copied, and the
        seconds spent copying."""
        parts, copied, seconds = None, 0, 0.0
        for job in jobs:
            buckets = job.result()[0]
            started = time.perf_counter()
            buckets, copied_here = pulled(buckets, device)
            seconds += time.perf_counter() - started
            parts = [[] for _ in buckets] if parts is None else parts
            for bucket_parts, bucket in zip(parts, buckets):
                bucket_parts.append(bucket)
            copied += copied_here
        return parts, copied, seconds

    def _sum_update(self, replica, optimizer, device, layout, ranges, parts, scale):
        """(In a replica's thread.) Sum the pulled buckets, scale them by the clipping factor (computed on
        replica 0), give each parameter its slice and apply the update: one graph."""
        with no_grad():
            totals = [summed(bucket_parts) for bucket_parts in parts]
            if scale is not None:
                factor = scale if scale.device == device else copy_to_device(scale, device)
                totals = [t * factor for t in totals]
        self._unbucket(replica, layout, ranges, totals)
        optimizer.step()

    def _upload_update(self, replica, optimizer, device, layout, total):
        """(In a replica's thread.) Upload the host-reduced gradient and apply the update."""
        self._unbucket(replica, layout, [(0, len(layout))], [tensor(total, device=device)])
        optimizer.step()

    def reduce(self, gradients, loss):
        """Combine this process's weighted gradient sum and loss with other processes' (none here; called
        only when `reduce_on_devices` is False)."""
        return gradients, loss

    @staticmethod
    def _bucket(replica, layout, ranges, weight):
        """The gradients of the parameters in `layout`, scaled by the replica's share, as flat pending float32
        tensors, one per range of `ranges` (indices into `layout`; scaled once per bucket, as a whole: the
        same products as per gradient, in one op)."""
        params = list(replica.parameters())
        buckets = []
        with no_grad():
            for lo, hi in ranges:
                flat = cat([reshape(params[j].grad.float(), params[j].numel()) for j in layout[lo:hi]], 0)
                buckets.append(flat if weight == 1.0 else flat * weight)
        return buckets

    @staticmethod
    def _unbucket(replica, layout, ranges, totals):
        """Give each parameter in `layout` its slice of its range's averaged bucket as its gradient."""
        chosen = set(layout)   # indices in parameter order, as `_bucket` joined them
        params = [p for j, p in enumerate(replica.parameters()) if j in chosen]
        with no_grad():
            for (lo, hi), total in zip(ranges, totals):
                group = params[lo:hi]
                for p, g in zip(group, split(total, [p.numel() for p in group])):   # one op for all the views
                    p.grad = reshape(g, p.shape).to(p.dtype)

    def close(self):
        self._pool.shutdown(wait=True)
