"""Datasets and the DataLoader that batches them (PyTorch's `torch.utils.data`).

A map-style dataset has `__getitem__` and `__len__`; an IterableDataset yields samples. The DataLoader
draws indices from a sampler (sequential, or a shuffled permutation from a seeded generator), groups
them into batches and collates each batch: tensors and arrays are stacked along a new first dim,
numbers become a tensor, tuples / lists / dicts are collated field by field.

TensorDataset batches its (non-differentiable) tensors from a host copy, read once and again after an
in-place change, so a batch is one numpy fancy index and one upload, not a graph op per sample. Loading runs in the calling thread (num_workers=0).
"""

from __future__ import annotations

import itertools
import numbers
from typing import Any, Callable, Generic, Iterable, Iterator, Sequence, TypeVar

import numpy as np

from ..autograd import Tensor
from ..autograd.factory import generator as _global_generator, tensor
from ..autograd.generator import Generator
from ..autograd.ops import stack

T_co = TypeVar("T_co", covariant=True)   # a dataset's sample type

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "random_split", "Sampler",
           "SequentialSampler", "RandomSampler", "BatchSampler", "DataLoader", "default_collate"]


class Dataset(Generic[T_co]):
    """A map-style dataset: `dataset[i]` is a sample, `len(dataset)` their number."""

    def __getitem__(self, index: Any) -> T_co:
        raise TypeError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other: Dataset[T_co]) -> ConcatDataset[T_co]:
        return ConcatDataset([self, other])


class IterableDataset(Generic[T_co]):
    """A dataset that is a stream: iterate it to get samples (no indices, no shuffling by the loader)."""

    def __iter__(self) -> Iterator[T_co]:
        raise TypeError(f"{type(self).__name__} must define __iter__")


class TensorDataset(Dataset[tuple[Tensor, ...]]):
    """Samples are rows: `dataset[i] == tuple(t[i] for t in tensors)`; all tensors share their first dim."""

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        sizes = {t.shape[0] if t.ndim else None for t in tensors}
        if len(sizes) != 1 or None in sizes:
            raise ValueError(f"Size mismatch between tensors: first dims {[tuple(t.shape) for t in tensors]}")
        self.tensors = tensors
        self._host = {}   # index -> (version, numpy copy) of the tensors that do not require grad

    def __len__(self):
        return self.tensors[0].shape[0]

    def __getitem__(self, index: Any) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def batch(self, indices):
        """The rows at `indices` of every tensor, as tensors on their devices (one upload each)."""
        rows = np.asarray(indices, dtype=np.int64)
        return tuple(t[rows.tolist()] if t.requires_grad else
                     tensor(self._host_copy(i)[rows], dtype=t.dtype, device=t.device)
                     for i, t in enumerate(self.tensors))

    def _host_copy(self, i):
        """Tensor i on the host, read once and again only after an in-place change (its version moved)."""
        t = self.tensors[i]
        version, array = self._host.get(i, (None, None))
        if version != t._version:
            version, array = t._version, t.numpy()
            self._host[i] = (version, array)
        return array


class Subset(Dataset[T_co]):
    """The samples of `dataset` at `indices`."""

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset[T_co]):
    """Datasets one after another."""

    def __init__(self, datasets: Iterable[Dataset[T_co]]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            index += len(self)
        part = int(np.searchsorted(self.cumulative_sizes, index, side="right"))
        if part >= len(self.datasets):
            raise IndexError(f"ConcatDataset: index {index} out of range for length {len(self)}")
        start = self.cumulative_sizes[part - 1] if part else 0
        return self.datasets[part][index - start]


def random_split(dataset: Dataset[T_co], lengths: Sequence[int | float],
                 generator: Generator | None = None) -> list[Subset[T_co]]:
    """Split into non-overlapping Subsets of the given lengths (or fractions summing to 1), shuffled."""
    n = len(dataset)
    lengths = list(lengths)
    if lengths and all(0 <= f <= 1 for f in lengths) and abs(sum(lengths) - 1) < 1e-9 and sum(lengths) != n:
        counts = [int(np.floor(n * f)) for f in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = _numpy_generator(generator).permutation(n).tolist()
    bounds = list(itertools.accumulate(lengths))
    return [Subset(dataset, order[end - size:end]) for size, end in zip(lengths, bounds)]


def _numpy_generator(generator):
    """A numpy Generator for one pass: the given Generator's stream, or a seed drawn from ggrad's global one."""
    if generator is None:
        return np.random.Generator(np.random.PCG64(int(_global_generator().integers(1 << 63))))
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be a ggrad.Generator, got {type(generator).__name__}")
    return generator.numpy


class Sampler:
    """An iterable over dataset indices."""

    def __init__(self, data_source=None):
        self.data_source = data_source


class SequentialSampler(Sampler):
    """0, 1, ..., len - 1."""

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A fresh permutation per pass (or `num_samples` draws with replacement)."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        super().__init__(data_source)
        self.replacement, self.generator = replacement, generator
        self._num_samples = num_samples
        if num_samples is not None and (not isinstance(num_samples, int) or num_samples <= 0):
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        rng, n = _numpy_generator(self.generator), len(self.data_source)
        if self.replacement:
            return iter(rng.integers(0, n, self.num_samples).tolist())
        rounds = -(-self.num_samples // n) if n else 0
        order = np.concatenate([rng.permutation(n) for _ in range(rounds)]) if rounds else np.zeros(0, np.int64)
        return iter(order[:self.num_samples].tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of `batch_size` indices from `sampler`; the last shorter one kept unless drop_last."""

    def __init__(self, sampler, batch_size, drop_last):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        super().__init__(None)
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        it = iter(self.sampler)
        while batch := list(itertools.islice(it, self.batch_size)):
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


def default_collate(batch: Sequence[Any]) -> Any:
    """Stack a list of samples into a batch, field by field (PyTorch's rules for tensors, arrays, numbers)."""
    first = batch[0]
    if isinstance(first, Tensor):
        return stack(list(batch))
    if isinstance(first, np.ndarray):
        return tensor(np.stack(batch))
    if isinstance(first, bool):
        return tensor(np.array(batch))
    if isinstance(first, numbers.Integral):
        return tensor(np.array(batch, dtype=np.int64))
    if isinstance(first, numbers.Real):
        return tensor(np.array(batch, dtype=np.float64).astype(np.float32))
    if isinstance(first, (str, bytes)):
        return list(batch)
    if isinstance(first, dict):
        return {key: default_collate([sample[key] for sample in batch]) for key in first}
    if isinstance(first, (tuple, list)):
        if any(len(sample) != len(first) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [default_collate(list(field)) for field in zip(*batch)]
        return type(first)(*fields) if hasattr(first, "_fields") else fields   # a namedtuple stays one
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                    f"found {type(first).__name__}")


class DataLoader:
    """Batches of a dataset, as PyTorch's DataLoader (in the calling thread).

    Args:
        dataset: a map-style Dataset (anything with __getitem__ and __len__) or an IterableDataset.
        batch_size (int or None): samples per batch; None yields single samples, uncollated. Default: 1.
        shuffle (bool): a new random order every pass. Default: False.
        sampler, batch_sampler: custom index orders (exclusive with shuffle / batch_size, as PyTorch).
        collate_fn: turns a list of samples into a batch. Default: `default_collate`.
        drop_last (bool): drop the last incomplete batch. Default: False.
        generator (ggrad.Generator): the shuffle order's source; default: a seed from ggrad's global
            generator (so `ggrad.manual_seed` makes the order reproducible).
        num_workers (int): only 0 (loading in the main thread) is supported.
    """

    def __init__(self, dataset: Dataset[Any] | IterableDataset[Any], batch_size: int | None = 1, shuffle: bool = False,
                 sampler: Iterable[Any] | None = None, batch_sampler: Iterable[Sequence[Any]] | None = None,
                 num_workers: int = 0, collate_fn: Callable[[list[Any]], Any] | None = None, pin_memory: bool = False,
                 drop_last: bool = False, generator: Generator | None = None) -> None:
        if num_workers != 0:
            raise ValueError(f"DataLoader: num_workers={num_workers}; ggrad loads in the calling thread "
                             "(num_workers=0)")
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.generator, self.num_workers, self.pin_memory = generator, num_workers, pin_memory
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable and (shuffle or sampler is not None or batch_sampler is not None):
            raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle, sampler and "
                             "batch_sampler options")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
            raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                             "and drop_last")
        if batch_sampler is not None:
            batch_size = None
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self.collate_fn = collate_fn if collate_fn is not None else (default_collate if batch_size is not None
                                                                      or batch_sampler is not None else None)

    def __iter__(self) -> Iterator[Any]:
        if self._iterable:
            yield from self._iterate_stream()
            return
        if self.batch_sampler is None:
            for index in self.sampler:
                sample = self.dataset[index]
                yield self.collate_fn(sample) if self.collate_fn is not None else sample
            return
        fast = (isinstance(self.dataset, TensorDataset) and self.collate_fn is default_collate and
                type(self.dataset).__getitem__ is TensorDataset.__getitem__)   # a subclass's own items win
        for indices in self.batch_sampler:
            if fast:
                yield list(self.dataset.batch(indices))
            else:
                yield self.collate_fn([self.dataset[i] for i in indices])

    def _iterate_stream(self):
        it = iter(self.dataset)
        if self.batch_size is None:
            yield from (self.collate_fn(s) if self.collate_fn is not None else s for s in it)
            return
        while batch := list(itertools.islice(it, self.batch_size)):
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield self.collate_fn(batch)

    def __len__(self):
        if self._iterable:
            raise TypeError("an IterableDataset's DataLoader has no len()")
        return len(self.batch_sampler) if self.batch_sampler is not None else len(self.sampler)
