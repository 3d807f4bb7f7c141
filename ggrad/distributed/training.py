"""`ggrad.distributed.dp_train`: `ggrad.parallel.dp_train` across MPI processes, one per device or host.

    mpiexec -n 2 python train.py        # in train.py: ggrad.distributed.dp_train(model, opt, loss, loader)

Every rank runs the same script over the same global batches; rank r takes its even share of each
batch and splits it across its own `devices` as `ggrad.parallel.DataParallel` does. Each shard's
gradients are weighted by its share of the GLOBAL batch and summed on the rank's host, then summed
across ranks by MPI (non-blocking all-reduces of float32 buckets of at most `bucket_mb`), which makes
them the global mean. Every rank then applies the same bytes with the same optimizer, so the replicas
stay bitwise identical: MPI's sum of two ranks is one IEEE addition, the same on both; for more ranks
this relies on the MPI library giving every rank the same sum, as the MPI standard advises (2 ranks
are tested). A rank whose one device is the CPU does all of this inside its step's graph
(in_graph.py: the bucket is all-reduced by a GGML node where GGML computed it, then the update):
one compute a step, no copy of the gradients. Rank 0's initial weights are broadcast first, as
PyTorch's DDP does. Only rank 0 writes checkpoints and shows
progress; `resume=` is read by rank 0 and broadcast.
"""

import io
import math
import time

import numpy as np

from ..autograd import execution
from ..parallel.checkpoint import fit_from, read_checkpoint, restore
from ..parallel.data_parallel import DataParallel, default_devices, shard_sizes
from ..parallel.training import DataParallelTrainer
from .in_graph import reduced_step
from ..collectives.mpi import allreduce_sum, broadcast_arrays, broadcast_bytes, check_same_size, world


def _broadcast_weights(model, comm, timeout):
    """Give `model` rank 0's parameters and buffers (bit for bit)."""
    state = model.state_dict()
    arrays = [np.ascontiguousarray(t.detach().numpy()) for t in state.values()]
    broadcast_arrays(comm, arrays, timeout, "broadcast of rank 0's initial weights")
    model.load_state_dict(dict(zip(state.keys(), arrays)))


class DistributedDataParallel(DataParallel):
    """DataParallel over this rank's `devices`, its gradients all-reduced with the other ranks' by MPI.

    Args:
        model, devices, optimizer, shard_weights: as DataParallel's (devices and weights local to the rank).
        comm (mpi4py Comm, optional): the ranks to train with. Default: every rank (COMM_WORLD).
        timeout (float): seconds an all-reduce may wait for the other ranks before a RankLostError.
        bucket_mb (float): largest all-reduce message, in MiB of float32.

    `in_graph` is True when the all-reduce runs inside the step's graph (devices == [the CPU]); setting
    it False takes the host path (compute, read the bucket, all-reduce, upload, update) instead.
    """

    reduce_on_devices = False   # MPI reads the buckets in host memory (or, on the CPU, in the graph)

    def __init__(self, model, devices, optimizer, shard_weights=None, comm=None, timeout=300.0, bucket_mb=25.0):
        if not timeout > 0 or not bucket_mb > 0:
            raise ValueError(f"DistributedDataParallel: timeout and bucket_mb must be > 0, got {timeout}, {bucket_mb}")
        self.comm = world() if comm is None else comm
        self.timeout = float(timeout)
        self.bucket_size = max(1, int(bucket_mb * 2**20) // 4)
        _broadcast_weights(model, self.comm, self.timeout)
        super().__init__(model, devices, optimizer, shard_weights)
        # a rank on the CPU alone all-reduces inside its step's graph (in_graph.py): one compute a step
        self.in_graph = len(self.devices) == 1 and self.devices[0].is_cpu
        self._reduce_in_place = self._allreduce_in_place   # one bound method for every step (graph cache)

    def step(self, x, y, loss_fn, max_grad_norm=None):
        """One step on a GLOBAL batch (the same on every rank): this rank trains on its share of it."""
        x, y = np.asarray(x), np.asarray(y)
        if len(x) != len(y):
            raise ValueError(f"DistributedDataParallel.step: {len(x)} inputs but {len(y)} targets")
        if not len(x):
            raise ValueError("DistributedDataParallel.step: an empty batch")
        sizes = shard_sizes(len(x), [1] * self.comm.size)
        lo = sum(sizes[:self.comm.rank])
        hi = lo + sizes[self.comm.rank]
        share = (hi - lo) / len(x)
        if hi == lo:   # a batch smaller than the world left this rank nothing: it steps on one sample that
            lo, hi = 0, 1   # weighs 0, so that its bucket has the others' layout and it applies their update
        if not self.in_graph:   # an empty share divides by an infinite batch: its gradients and loss weigh 0
            return self._step(x[lo:hi], y[lo:hi], loss_fn, max_grad_norm, len(x) if share else math.inf)
        started = time.perf_counter()
        self.timings = {"reduce": 0.0}
        loss, devices = reduced_step(self.module, self.optimizers[0], self.devices[0], x[lo:hi], y[lo:hi], loss_fn,
                                     share, self._reduce_in_place, max_grad_norm)
        recorded = time.perf_counter()
        for device in devices:
            execution.realize(device)
        value = loss.item()
        done = time.perf_counter()
        # DataParallel's spans: the all-reduce runs inside the compute and the update after it, in the same
        # graph (update 0); compute is the rest of the graph's time
        reduce = self.timings["reduce"]
        self.timings = {"step": done - started, "record": recorded - started,
                        "compute": done - recorded - reduce, "reduce": reduce, "update": 0.0}
        return value

    def _allreduce_in_place(self, flat):
        """Sum the float32 array `flat` across the ranks, in place, in buckets (called inside the graph)."""
        started = time.perf_counter()
        check_same_size(self.comm, len(flat), self.timeout, "gradient all-reduce")
        allreduce_sum(self.comm, [flat[i:i + self.bucket_size] for i in range(0, len(flat), self.bucket_size)],
                      self.timeout)
        self.timings["reduce"] += time.perf_counter() - started

    def reduce(self, gradients, loss):
        """Sum the ranks' weighted gradients and losses: one float32 vector, all-reduced in buckets."""
        flat = np.empty(len(gradients) + 1, np.float32)
        flat[:-1] = gradients
        flat[-1] = loss
        check_same_size(self.comm, len(flat), self.timeout, "gradient all-reduce")
        buckets = [flat[i:i + self.bucket_size] for i in range(0, len(flat), self.bucket_size)]
        allreduce_sum(self.comm, buckets, self.timeout)
        return flat[:-1].astype(np.float64), float(flat[-1])


def _read_checkpoint(path, comm, timeout):
    """The checkpoint at `path` as rank 0 reads it, on every rank."""
    data = b""
    if comm.rank == 0:
        with open(path, "rb") as f:
            data = f.read()
    return read_checkpoint(io.BytesIO(broadcast_bytes(comm, data, timeout, f"broadcast of checkpoint {path}")))


def dp_train(model, optimizer, loss_fn, data, devices=None, epochs=1, max_steps=None, shard_weights=None,
             max_grad_norm=None, callbacks=(), checkpoint=None, checkpoint_every=None, resume=None, verbose=1,
             comm=None, timeout=300.0, bucket_mb=25.0):
    """`ggrad.parallel.dp_train` across the MPI ranks (run the script under mpiexec); returns the History.

    The arguments are `ggrad.parallel.dp_train`'s, with these differences:
        data: the same global batches on every rank (same data, same seed); rank r trains on its share.
        devices (list, optional): this rank's devices. Default: its GPUs, else its CPU.
        checkpoint: written by rank 0 only. resume: read by rank 0 and broadcast.
        verbose: rank 0's; the other ranks are silent.
        comm (mpi4py Comm, optional): default COMM_WORLD.
        timeout (float): seconds to wait for the other ranks at a step before raising RankLostError
            (on every surviving rank; launch with `mpiexec -disable-auto-cleanup`, else MPICH ends them all).
        bucket_mb (float): all-reduce bucket size.
    """
    comm = world() if comm is None else comm
    start = _read_checkpoint(resume, comm, timeout) if resume is not None else None
    if start is not None:
        restore(model, optimizer, start)
    ddp = DistributedDataParallel(model, default_devices() if devices is None else devices, optimizer,
                                  shard_weights, comm, timeout, bucket_mb)
    try:
        trainer = DataParallelTrainer(ddp)
        trainer.compile(optimizer=optimizer, loss=loss_fn, clipnorm=max_grad_norm)
        return fit_from(trainer, data, start, epochs, max_steps, callbacks, verbose if comm.rank == 0 else 0,
                        checkpoint, checkpoint_every, write=comm.rank == 0)
    finally:
        ddp.close()
