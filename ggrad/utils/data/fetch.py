"""Reading one batch of a dataset: the same code in the calling thread and in DataLoader worker processes."""

from __future__ import annotations

import itertools
from typing import Any, Callable, Iterator

from .collate import default_collate
from .dataset import TensorDataset

__all__ = ["fetch", "stream_batches"]


def fetch(dataset: Any, task: Any, collate_fn: Callable[[Any], Any] | None, batched: bool) -> Any:
    """The batch of a map-style dataset at the indices `task` (`batched`), or its one sample at index `task`.
    A TensorDataset collated by default is read with one fancy index per tensor."""
    if not batched:
        sample = dataset[task]
        return collate_fn(sample) if collate_fn is not None else sample
    if (isinstance(dataset, TensorDataset) and collate_fn is default_collate and
            type(dataset).__getitem__ is TensorDataset.__getitem__):   # a subclass's own items win
        return list(dataset.batch(task))
    return collate_fn([dataset[i] for i in task])


def stream_batches(dataset: Any, batch_size: int | None, drop_last: bool,
                   collate_fn: Callable[[Any], Any] | None) -> Iterator[Any]:
    """The batches of an iterable dataset: `batch_size` samples collated (the last short one unless
    drop_last), or each sample alone when batch_size is None."""
    it = iter(dataset)
    if batch_size is None:
        yield from (collate_fn(s) if collate_fn is not None else s for s in it)
        return
    while batch := list(itertools.islice(it, batch_size)):
        if len(batch) < batch_size and drop_last:
            return
        yield collate_fn(batch)
