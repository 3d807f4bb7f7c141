"""DataLoader worker processes and lazy samplers, checked against PyTorch's DataLoader on the same datasets."""

import itertools
import os
import random
import time

import numpy as np
import pytest

import ggrad
from ggrad.utils import data as gdata

torch = pytest.importorskip("torch")
tdata = torch.utils.data


class Squares:
    """A map-style dataset of plain Python values (the same object works with both loaders)."""
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return np.array([i, i * i], dtype=np.int64), i


def _plain(batch):
    """A batch as nested lists, from either library's tensors."""
    if isinstance(batch, (list, tuple)):
        return [_plain(b) for b in batch]
    return batch.tolist() if hasattr(batch, "tolist") else batch


@pytest.mark.parametrize("kwargs", [dict(batch_size=3), dict(batch_size=4, drop_last=True), dict(batch_size=None)])
def test_map_style_batches_as_pytorch_with_two_workers(kwargs):
    ours = [_plain(b) for b in gdata.DataLoader(Squares(), num_workers=2, **kwargs)]
    theirs = [_plain(b) for b in tdata.DataLoader(Squares(), num_workers=2, **kwargs)]
    assert ours == theirs
    assert ours == [_plain(b) for b in gdata.DataLoader(Squares(), **kwargs)]


class Shards(gdata.IterableDataset):
    """0..10, each worker yielding its own slice (PyTorch's sharding idiom)."""
    def __init__(self, info):
        self.info = info

    def __iter__(self):
        worker = self.info()
        if worker is None:
            return iter(range(11))
        per = -(-11 // worker.num_workers)
        return iter(range(worker.id * per, min(11, (worker.id + 1) * per)))


class TorchShards(tdata.IterableDataset):
    def __iter__(self):
        return iter(Shards(tdata.get_worker_info))


def test_iterable_dataset_sharded_by_worker_info_as_pytorch():
    for workers in (1, 3):
        ours = [b.tolist() for b in gdata.DataLoader(Shards(gdata.get_worker_info), batch_size=2,
                                                     num_workers=workers)]
        theirs = [b.tolist() for b in tdata.DataLoader(TorchShards(), batch_size=2, num_workers=workers)]
        assert ours == theirs
    assert gdata.get_worker_info() is None


class WhoAmI:
    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = gdata.get_worker_info()
        return [info.id, str(info.seed), os.getpid(), int(os.environ.get("GGRAD_TEST_INIT", -1)),
                random.randrange(1 << 30), ggrad.randint(0, 1 << 30, (1,)).item()]


def _init(worker_id):
    os.environ["GGRAD_TEST_INIT"] = str(worker_id)


def test_worker_seeds_init_fn_and_reproducibility():
    def run():
        ggrad.manual_seed(5)
        return [row for b in gdata.DataLoader(WhoAmI(), batch_size=2, num_workers=2, worker_init_fn=_init)
                for row in zip(*_plain(b))]
    first, second = run(), run()
    assert [r[0] for r in first] == [0, 0, 1, 1, 0, 0, 1, 1]           # round-robin, in order
    assert [r[3] for r in first] == [r[0] for r in first]                # worker_init_fn ran in each worker
    seeds = {r[0]: r[1] for r in first}
    assert int(seeds[1]) == int(seeds[0]) + 1                                     # base_seed + worker_id
    assert len({r[2] for r in first}) == 2 and os.getpid() not in {r[2] for r in first}
    assert [r[4:] for r in first] == [r[4:] for r in second]             # random, ggrad reseeded per worker
    assert first[0][4] != first[2][4]


def test_persistent_workers_stay_between_passes():
    loader = gdata.DataLoader(WhoAmI(), batch_size=4, num_workers=2, persistent_workers=True)
    pids = [{pid for b in loader for pid in _plain(b)[2]} for _ in range(2)]
    assert pids[0] == pids[1] and len(pids[0]) == 2
    half = iter(loader)
    next(half)                                                           # an abandoned pass ...
    assert len([b for b in loader]) == 2                                 # ... does not leak into the next
    fresh = gdata.DataLoader(WhoAmI(), batch_size=4, num_workers=2)
    assert {pid for b in fresh for pid in _plain(b)[2]} != {pid for b in fresh for pid in _plain(b)[2]}


class Fails:
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 2:
            raise KeyError("sample 2 is missing")
        return i


def test_a_worker_exception_is_raised_with_its_type_as_pytorch():
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process") as theirs:
        list(tdata.DataLoader(Fails(), batch_size=1, num_workers=2))
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process 0") as ours:
        list(gdata.DataLoader(Fails(), batch_size=1, num_workers=2))
    assert "sample 2 is missing" in str(ours.value) and type(ours.value) is type(theirs.value)


class Dies:
    def __len__(self):
        return 4

    def __getitem__(self, i):
        os._exit(3)


class Slow:
    def __len__(self):
        return 2

    def __getitem__(self, i):
        time.sleep(2)
        return i


def test_a_dead_or_silent_worker_raises_instead_of_hanging():
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        list(gdata.DataLoader(Dies(), num_workers=1))
    with pytest.raises(RuntimeError, match="timed out after 0.5 seconds"):
        list(gdata.DataLoader(Slow(), num_workers=1, timeout=0.5, prefetch_factor=1))


def test_out_of_order_pin_memory_and_spawn():
    got = [b.item() for b in gdata.DataLoader(range(6), num_workers=2, in_order=False, pin_memory=True,
                                             prefetch_factor=3)]
    assert sorted(got) == list(range(6))
    spawned = gdata.DataLoader(Squares(), batch_size=5, num_workers=1, multiprocessing_context="spawn")
    assert [_plain(b) for b in spawned] == [_plain(b) for b in gdata.DataLoader(Squares(), batch_size=5)]


@pytest.mark.parametrize("kwargs", [dict(num_workers=-1), dict(persistent_workers=True), dict(prefetch_factor=2),
                                    dict(timeout=-1)])
def test_worker_options_are_checked_as_pytorch(kwargs):
    with pytest.raises(ValueError) as theirs:
        tdata.DataLoader(range(3), **kwargs)
    with pytest.raises(ValueError) as ours:
        gdata.DataLoader(range(3), **kwargs)
    assert str(ours.value).split(";")[0].split(" ")[:3] == str(theirs.value).split(";")[0].split(" ")[:3]


def test_samplers_with_replacement_are_lazy():
    huge = gdata.RandomSampler(range(10), replacement=True, num_samples=10 ** 10)
    assert len(huge) == len(tdata.RandomSampler(range(10), replacement=True, num_samples=10 ** 10)) == 10 ** 10
    assert all(0 <= i < 10 for i in itertools.islice(huge, 1000))
    loader = gdata.DataLoader(range(10), batch_size=4, sampler=huge)
    assert len(loader) == 25 * 10 ** 8 and next(iter(loader)).shape == (4,)
    weighted = gdata.WeightedRandomSampler([0.0, 1.0, 3.0], 10 ** 12)
    draws = list(itertools.islice(weighted, 4000))
    assert draws.count(0) == 0 and 0.7 < draws.count(2) / 4000 < 0.8
    rounds = list(gdata.RandomSampler(range(3), num_samples=7, generator=ggrad.Generator().manual_seed(1)))
    assert sorted(rounds[:3]) == sorted(rounds[3:6]) == [0, 1, 2] and len(rounds) == 7


@pytest.mark.parametrize("make", [lambda m: m.WeightedRandomSampler([0.1, 0.9], 3, replacement=False),
                                  lambda m: m.WeightedRandomSampler([0.1, 0.9], 0),
                                  lambda m: m.WeightedRandomSampler([[0.1, 0.9]], 2),
                                  lambda m: m.RandomSampler(range(3), replacement=1)])
def test_sampler_errors_as_pytorch(make):
    with pytest.raises(Exception) as theirs:
        list(make(tdata))
    with pytest.raises(type(theirs.value)):
        list(make(gdata))


def test_subset_random_sampler_and_chain_dataset():
    order = list(gdata.SubsetRandomSampler([3, 5, 7], generator=ggrad.Generator().manual_seed(0)))
    assert sorted(order) == [3, 5, 7] and len(gdata.SubsetRandomSampler([3, 5, 7])) == 3

    class Stream(gdata.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n))

        def __len__(self):
            return self.n

    chain = gdata.ChainDataset([Stream(2), Stream(3)])
    assert list(chain) == [0, 1, 0, 1, 2] and len(chain) == 5
    with pytest.raises(TypeError, match="IterableDataset"):
        gdata.ChainDataset([range(2)])
