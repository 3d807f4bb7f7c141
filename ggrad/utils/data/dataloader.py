"""The DataLoader (PyTorch's `torch.utils.data.dataloader`): batches of a dataset, in the calling thread or in
worker processes."""

from __future__ import annotations

import itertools
import weakref
from typing import Any, Callable, Iterable, Iterator, Sequence

from ...autograd.generator import Generator
from .collate import default_collate
from .dataset import Dataset, IterableDataset
from .fetch import fetch, stream_batches
from .sampler import BatchSampler, RandomSampler, SequentialSampler
from .worker import WorkerInfo, WorkerPool, get_worker_info

__all__ = ["DataLoader", "default_collate", "get_worker_info", "WorkerInfo"]


class DataLoader:
    """Batches of a dataset, as PyTorch's DataLoader: in the calling thread, or in `num_workers` processes.

    Args:
        dataset: a map-style Dataset (anything with __getitem__ and __len__) or an IterableDataset.
        batch_size (int or None): samples per batch; None yields single samples, uncollated. Default: 1.
        shuffle (bool): a new random order every pass. Default: False.
        sampler, batch_sampler: custom index orders (exclusive with shuffle / batch_size, as PyTorch).
        num_workers (int): worker processes reading batches (`worker.py`); 0 reads in the calling thread.
        collate_fn: turns a list of samples into a batch. Default: `default_collate`.
        pin_memory (bool), pin_memory_device (str): accepted; GGML uploads batches from host memory itself,
            so there is nothing to pin.
        drop_last (bool): drop the last incomplete batch. Default: False.
        timeout (float): seconds to wait for a worker's batch before RuntimeError; 0 waits as long as the
            workers live.
        worker_init_fn: called as `worker_init_fn(worker_id)` in each worker, after seeding.
        multiprocessing_context: a multiprocessing context or its name ("fork", "spawn", "forkserver");
            default: multiprocessing's.
        generator (ggrad.Generator): the source of the shuffle order and the workers' base seed; default: a
            seed from ggrad's global generator (so `ggrad.manual_seed` makes both reproducible).
        prefetch_factor (int): batches each worker reads ahead. Default: 2 with workers, None without.
        persistent_workers (bool): keep the workers between passes.
        in_order (bool): yield batches in sampler order (else as workers finish them). Default: True.
    """

    def __init__(self, dataset: Dataset[Any] | IterableDataset[Any], batch_size: int | None = 1,
                 shuffle: bool | None = None, sampler: Iterable[Any] | None = None,
                 batch_sampler: Iterable[Sequence[Any]] | None = None, num_workers: int = 0,
                 collate_fn: Callable[[list[Any]], Any] | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: Any = None, generator: Generator | None = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False, pin_memory_device: str = "",
                 in_order: bool = True) -> None:
        _check_workers(num_workers, timeout, prefetch_factor, persistent_workers)
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.generator, self.num_workers, self.pin_memory = generator, num_workers, pin_memory
        self.pin_memory_device, self.timeout, self.worker_init_fn = pin_memory_device, timeout, worker_init_fn
        self.multiprocessing_context, self.persistent_workers = multiprocessing_context, persistent_workers
        self.prefetch_factor = (2 if num_workers else None) if prefetch_factor is None else prefetch_factor
        self.in_order = in_order
        self.is_iterable = isinstance(dataset, IterableDataset)
        if self.is_iterable and (shuffle or sampler is not None or batch_sampler is not None):
            raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle, sampler and "
                             "batch_sampler options")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
            raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                             "and drop_last")
        if batch_sampler is not None:
            batch_size = None
        if sampler is None and not self.is_iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self.is_iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self.collate_fn = collate_fn if collate_fn is not None else (default_collate if batch_size is not None
                                                                      or batch_sampler is not None else None)
        self._workers = None   # the persistent WorkerPool, once started

    def __iter__(self) -> Iterator[Any]:
        if self.num_workers == 0:
            return self._in_this_thread()
        if self.persistent_workers:
            if self._workers is None:
                self._workers = WorkerPool(self)
                weakref.finalize(self, self._workers.shutdown)
            return self._workers.run(self._tasks())
        return self._with_workers()

    def _tasks(self):
        """What one batch is made from: its indices, one index (no batching), or nothing (a stream)."""
        if self.is_iterable:
            return itertools.repeat(None)
        return iter(self.batch_sampler if self.batch_sampler is not None else self.sampler)

    def _in_this_thread(self):
        if self.is_iterable:
            yield from stream_batches(self.dataset, self.batch_size, self.drop_last, self.collate_fn)
            return
        batched = self.batch_sampler is not None
        for task in self._tasks():
            yield fetch(self.dataset, task, self.collate_fn, batched)

    def _with_workers(self):
        pool = WorkerPool(self)
        try:
            yield from pool.run(self._tasks())
        finally:
            pool.shutdown()

    def __len__(self):
        if self.is_iterable:
            raise TypeError("an IterableDataset's DataLoader has no len()")
        return len(self.batch_sampler) if self.batch_sampler is not None else len(self.sampler)


def _check_workers(num_workers, timeout, prefetch_factor, persistent_workers):
    """PyTorch's checks of the worker options, with its messages."""
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
    if timeout < 0:
        raise ValueError("timeout option should be non-negative")
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError("prefetch_factor option could only be specified in multiprocessing. Let num_workers > 0 "
                         "to enable multiprocessing, otherwise set prefetch_factor to None.")
    if prefetch_factor is not None and (not isinstance(prefetch_factor, int) or prefetch_factor < 0):
        raise ValueError("prefetch_factor option should be non-negative")
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers option needs num_workers > 0")
