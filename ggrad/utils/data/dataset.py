"""Datasets (PyTorch's `torch.utils.data.dataset`): map-style and iterable, subsets, concatenations, splits.

A map-style dataset has `__getitem__` and `__len__`; an IterableDataset yields samples. TensorDataset batches
its (non-differentiable) tensors from a host copy, read once and again after an in-place change, so a batch is
one numpy fancy index and one upload, not a graph op per sample.
"""

from __future__ import annotations

import itertools
from typing import Any, Generic, Iterable, Iterator, Sequence, TypeVar

import numpy as np

from ...autograd import Tensor
from ...autograd.factory import tensor
from ...autograd.generator import Generator
from .sampler import numpy_generator

T_co = TypeVar("T_co", covariant=True)   # a dataset's sample type

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "ChainDataset", "random_split"]


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


class ChainDataset(IterableDataset[T_co]):
    """Iterable datasets one after another."""

    def __init__(self, datasets: Iterable[IterableDataset[T_co]]) -> None:
        self.datasets = list(datasets)
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset only supports IterableDataset, got {type(d).__name__}")

    def __iter__(self) -> Iterator[T_co]:
        for d in self.datasets:
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


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
    order = numpy_generator(generator).permutation(n).tolist()
    bounds = list(itertools.accumulate(lengths))
    return [Subset(dataset, order[end - size:end]) for size, end in zip(lengths, bounds)]


