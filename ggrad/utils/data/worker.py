"""DataLoader worker processes (`num_workers > 0`), as PyTorch's: each worker reads batches of a dataset in its
own process, results come back in order.

The main process sends tasks (a batch's indices; for an IterableDataset, "your next batch") round-robin to the
workers, at most `prefetch_factor` per worker ahead, and yields results in the order sent (`in_order`) or as
they come. Each worker is seeded `base_seed + worker_id` (Python's `random`, numpy's global generator and
ggrad's), the base drawn from the loader's generator (or ggrad's global one) when the workers start; then
`worker_init_fn(worker_id)` runs and `get_worker_info()` says which worker it is (an IterableDataset uses it to
shard itself). An exception in a worker is raised again in the main process, of the same type, with the
worker's traceback in its message; a worker that dies raises RuntimeError instead of hanging. Persistent
workers stay up between passes; an abandoned pass's late results are dropped by their pass number.
Batches cross processes pickled (a Tensor as its numpy values), so the dataset's tensors should be on the CPU.
"""

from __future__ import annotations

import dataclasses
import itertools
import multiprocessing
import queue
import random
import sys
import time
import traceback
from typing import Any

import numpy as np

from ...autograd.execution import realize
from ...autograd.factory import manual_seed
from .fetch import fetch, stream_batches
from .sampler import numpy_generator

__all__ = ["WorkerInfo", "get_worker_info", "WorkerPool"]

_POLL_S = 1.0   # how often a waiting main process checks that its workers are alive


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """What a worker process knows of itself: `id`, `num_workers`, `seed`, and its copy of `dataset`."""
    id: int
    num_workers: int
    seed: int
    dataset: Any


_worker_info: WorkerInfo | None = None   # set once in each worker process


def get_worker_info() -> WorkerInfo | None:
    """In a DataLoader worker process, its WorkerInfo; in the main process, None."""
    return _worker_info


@dataclasses.dataclass
class _Failure:
    """An exception raised in a worker, carried back as its type and text."""
    kind: type
    text: str

    def reraise(self):
        try:
            error = self.kind(self.text)
        except Exception:   # an exception type that takes other arguments
            error = RuntimeError(self.text)
        raise error


class _Exhausted:
    """The answer of an IterableDataset worker that has no batch left."""


_NO_MORE = object()   # the end of an iterator, in this process


def _failure(worker_id):
    """The exception being handled in worker `worker_id`, as a _Failure."""
    text = traceback.format_exc()
    kind = type(sys.exc_info()[1])
    return _Failure(kind, f"Caught {kind.__name__} in DataLoader worker process {worker_id}.\n"
                          f"Original {text}")


def _worker_loop(job, worker_id, seed, tasks, results):
    """The body of worker process `worker_id`: seed, init, then answer tasks until told to stop (None)."""
    global _worker_info
    _worker_info = WorkerInfo(worker_id, job["num_workers"], seed, job["dataset"])
    random.seed(seed)
    np.random.seed(seed % (1 << 32))
    manual_seed(seed)
    try:
        if job["worker_init_fn"] is not None:
            job["worker_init_fn"](worker_id)
        failed = None
    except Exception:
        failed = _failure(worker_id)
    stream, current = None, None
    while True:
        task = tasks.get()
        if task is None:
            break
        epoch, index, payload = task
        if failed is not None:
            results.put((epoch, index, failed))
            continue
        if epoch != current:   # a new pass: an IterableDataset starts over
            current, stream = epoch, None
        try:
            if job["iterable"]:
                if stream is None:
                    stream = stream_batches(job["dataset"], job["batch_size"], job["drop_last"], job["collate_fn"])
                batch = next(stream, _NO_MORE)
                batch = _Exhausted() if batch is _NO_MORE else batch
            else:
                batch = fetch(job["dataset"], payload, job["collate_fn"], job["batched"])
        except Exception:
            batch = _failure(worker_id)
        results.put((epoch, index, batch))
    tasks.cancel_join_thread()
    results.cancel_join_thread()


class WorkerPool:
    """The worker processes of one DataLoader; `run(tasks)` is one pass over the task payloads."""

    def __init__(self, loader):
        context = loader.multiprocessing_context
        if context is None or isinstance(context, str):
            context = multiprocessing.get_context(context)
        self.n, self.prefetch = loader.num_workers, loader.prefetch_factor
        self.timeout, self.in_order = loader.timeout, loader.in_order
        job = {"dataset": loader.dataset, "num_workers": self.n, "worker_init_fn": loader.worker_init_fn,
               "iterable": loader.is_iterable, "batched": loader.batch_sampler is not None,
               "batch_size": loader.batch_size, "drop_last": loader.drop_last, "collate_fn": loader.collate_fn}
        base_seed = int(numpy_generator(loader.generator).integers(1 << 62))
        realize()   # a forked worker must not compute what the main process left pending
        self.results = context.Queue()
        self.tasks = [context.Queue() for _ in range(self.n)]
        self.workers = [context.Process(target=_worker_loop, args=(job, i, base_seed + i, self.tasks[i], self.results),
                                        daemon=True) for i in range(self.n)]
        for w in self.workers:
            w.start()
        self.epochs = itertools.count()

    def run(self, payloads):
        """Yield the result of every payload, sent round-robin to the workers that still have data."""
        epoch, sent, received, done = next(self.epochs), 0, {}, 0
        active, owner, turn = [True] * self.n, {}, itertools.cycle(range(self.n))
        payloads = iter(payloads)

        def send():
            nonlocal sent
            worker = next((w for w in (next(turn) for _ in range(self.n)) if active[w]), None)
            payload = next(payloads, _NO_MORE) if worker is not None else _NO_MORE
            if payload is _NO_MORE:
                return
            self.tasks[worker].put((epoch, sent, payload))
            owner[sent] = worker
            sent += 1

        for _ in range(self.prefetch * self.n):
            send()
        while done < sent:
            if self.in_order:
                while done not in received:
                    index, batch = self._get(epoch)
                    received[index] = batch
                index, batch = done, received.pop(done)
            else:
                index, batch = self._get(epoch)
            done += 1
            if isinstance(batch, _Failure):
                batch.reraise()
            exhausted = isinstance(batch, _Exhausted)
            if exhausted:
                active[owner[index]] = False
            send()
            if not exhausted:
                yield batch

    def _get(self, epoch):
        """The next (index, batch) of pass `epoch`; late results of an abandoned pass are dropped."""
        start = time.monotonic()
        while True:
            wait = _POLL_S if not self.timeout else min(_POLL_S, max(0.0, start + self.timeout - time.monotonic()))
            try:
                got_epoch, index, batch = self.results.get(timeout=wait)
            except queue.Empty:
                dead = [w.pid for w in self.workers if not w.is_alive()]
                if dead:
                    raise RuntimeError(f"DataLoader worker (pid(s) {', '.join(map(str, dead))}) exited "
                                       "unexpectedly") from None
                if self.timeout and time.monotonic() - start >= self.timeout:
                    raise RuntimeError(f"DataLoader timed out after {self.timeout} seconds") from None
                continue
            if got_epoch == epoch:
                return index, batch

    def shutdown(self):
        """Stop the workers (joined, terminated if they do not stop within seconds)."""
        for q in self.tasks:
            q.put(None)
        for w in self.workers:
            w.join(timeout=5)
            if w.is_alive():
                w.terminate()
        for q in self.tasks + [self.results]:
            q.cancel_join_thread()
            q.close()
