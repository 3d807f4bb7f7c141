"""`DistributedSampler` (PyTorch's `torch.utils.data.distributed`): each rank's share of a dataset.

The order is PyTorch's index for index: the shuffle is `torch.randperm(len, generator seeded with
seed + epoch)`, reproduced from the same Mersenne Twister stream (numpy's MT19937 with MT's 32-bit
seeding, which is PyTorch's CPU generator) and PyTorch's swap rule; then the list is padded by
repeating its head (or cut, with drop_last) to a multiple of the ranks, and rank r takes every
num_replicas-th index from r.
"""

import math

import numpy as np

from ...collectives.group import get_rank, get_world_size
from .sampler import Sampler

__all__ = ["DistributedSampler"]

# below this length PyTorch's randperm draws one 32-bit number per swap; above, 64-bit ones, inside-out
_SMALL = (2**32 - 1) // 20


def torch_randperm(n, seed):
    """The list `torch.randperm(n, generator=torch.Generator().manual_seed(seed))` gives on the CPU."""
    bits = np.random.MT19937()
    bits._legacy_seeding(seed & 0xFFFFFFFF)   # PyTorch's mt19937 seeds with the low 32 bits, as MT's init
    order = list(range(n))
    if n < _SMALL:
        draws = bits.random_raw(max(n - 1, 0)).tolist()
        for i in range(n - 1):
            j = i + draws[i] % (n - i)
            order[i], order[j] = order[j], order[i]
        return order
    for i in range(n):   # 64 bits from two draws, the first one high
        high, low = bits.random_raw(2).tolist()
        j = ((high << 32) | low) % (i + 1)
        order[i], order[j] = order[j], i
    return order


class DistributedSampler(Sampler):
    """The indices of rank `rank` of `num_replicas` (default: the process group's), a new shuffle per
    `set_epoch(epoch)`; every rank gets `len(self)` indices.

    Args:
        dataset: anything with a length. num_replicas, rank (int, optional): default from the process group.
        shuffle (bool): default True. seed (int): the same on every rank; default 0.
        drop_last (bool): cut the tail instead of padding it with the head. Default: False.
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        super().__init__(dataset)
        if num_replicas is None:
            num_replicas = get_world_size()
        if rank is None:
            rank = get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.epoch, self.shuffle, self.seed, self.drop_last = 0, shuffle, seed, drop_last
        if drop_last and len(dataset) % num_replicas != 0:
            self.num_samples = math.ceil((len(dataset) - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(len(dataset) / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        n = len(self.dataset)
        indices = torch_randperm(n, self.seed + self.epoch) if self.shuffle else list(range(n))
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            padding = self.total_size - len(indices)
            indices += (indices * math.ceil(padding / len(indices)))[:padding] if padding > len(indices) else \
                indices[:padding]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch whose shuffle the next pass uses (call it before each epoch, on every rank)."""
        self.epoch = epoch
