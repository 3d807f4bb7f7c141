"""Samplers (PyTorch's `torch.utils.data.sampler`): the orders in which a DataLoader reads a dataset.

They draw lazily: `RandomSampler(ds, replacement=True, num_samples=10**10)` costs a chunk of draws at a time,
never the whole list.
"""

from __future__ import annotations

import itertools

import numpy as np

from ...autograd.factory import generator as _global_generator
from ...autograd.generator import Generator

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler"]

_CHUNK = 1 << 15   # indices drawn at a time by the samplers with replacement


def numpy_generator(generator):
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
    """A fresh permutation per pass, or `num_samples` draws with replacement (drawn a chunk at a time)."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        super().__init__(data_source)
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement}")
        self.replacement, self.generator = replacement, generator
        self._num_samples = num_samples
        if num_samples is not None and (not isinstance(num_samples, int) or num_samples <= 0):
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        rng, n = numpy_generator(self.generator), len(self.data_source)   # drawn now, as the pass starts
        if self.replacement:
            return _draws(lambda count: rng.integers(0, n, count), self.num_samples)
        return _permutations(rng, n, self.num_samples)

    def __len__(self):
        return self.num_samples


def _draws(draw, total):
    """`total` indices from `draw(count)`, at most _CHUNK drawn at a time."""
    for start in range(0, total, _CHUNK):
        yield from draw(min(_CHUNK, total - start)).tolist()


def _permutations(rng, n, total):
    """The first `total` indices of one permutation of range(n) after another."""
    while total > 0 and n:
        yield from rng.permutation(n)[:total].tolist()
        total -= n


class SubsetRandomSampler(Sampler):
    """The given `indices` in a fresh random order per pass."""

    def __init__(self, indices, generator=None):
        super().__init__(None)
        self.indices, self.generator = indices, generator

    def __iter__(self):
        order = numpy_generator(self.generator).permutation(len(self.indices)).tolist()
        return (self.indices[i] for i in order)

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """`num_samples` indices of range(len(weights)) drawn with probability proportional to `weights`
    (with replacement, drawn a chunk at a time; without, each index at most once)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        super().__init__(None)
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        weights = np.asarray(weights.numpy() if hasattr(weights, "numpy") else weights, dtype=np.float64)
        if weights.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(weights.shape)}")
        if (weights < 0).any() or not np.isfinite(weights).all() or weights.sum() <= 0:
            raise RuntimeError("WeightedRandomSampler: weights must be finite, non-negative, with a positive sum")
        if not replacement and num_samples > np.count_nonzero(weights):
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
        self.weights, self.num_samples, self.replacement, self.generator = weights, num_samples, replacement, generator

    def __iter__(self):
        rng, p = numpy_generator(self.generator), self.weights / self.weights.sum()
        if self.replacement:
            return _draws(lambda count: rng.choice(len(p), count, p=p), self.num_samples)
        return iter(rng.choice(len(p), self.num_samples, replace=False, p=p).tolist())

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


