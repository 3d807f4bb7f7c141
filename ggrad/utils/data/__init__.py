"""Datasets and the DataLoader that batches them (PyTorch's `torch.utils.data`), under PyTorch's module paths:
`dataset`, `sampler`, `dataloader`, `distributed` (DistributedSampler) (and `collate` for `default_collate`,
`worker` for worker processes)."""

from . import distributed
from .collate import default_collate
from .dataloader import DataLoader, get_worker_info
from .distributed import DistributedSampler
from .dataset import ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
                      WeightedRandomSampler)

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "ChainDataset", "random_split",
           "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler", "DistributedSampler", "DataLoader", "default_collate", "get_worker_info"]
