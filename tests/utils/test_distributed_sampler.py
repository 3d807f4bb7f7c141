"""DistributedSampler against PyTorch's own, index for index: shuffle, seed, epoch, drop_last, padding (also
padding longer than the dataset), every rank; and its argument errors as PyTorch's."""

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data.distributed import DistributedSampler as TorchSampler  # noqa: E402

from ggrad.utils.data.distributed import DistributedSampler, torch_randperm  # noqa: E402


@pytest.mark.parametrize("n", [0, 1, 2, 7, 10, 33, 1000])
@pytest.mark.parametrize("seed", [0, 5, 2**33 + 17])
def test_the_permutation_is_torch_randperms(n, seed):
    generator = torch.Generator()
    generator.manual_seed(seed)
    assert torch_randperm(n, seed) == torch.randperm(n, generator=generator).tolist()


@pytest.mark.parametrize("length", [1, 2, 5, 12, 13, 101])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("drop_last", [True, False])
def test_every_rank_gets_pytorchs_indices(length, replicas, shuffle, drop_last):
    data = range(length)
    for rank in range(replicas):
        ours = DistributedSampler(data, replicas, rank, shuffle=shuffle, seed=11, drop_last=drop_last)
        theirs = TorchSampler(data, replicas, rank, shuffle=shuffle, seed=11, drop_last=drop_last)
        for epoch in (0, 1, 4):
            ours.set_epoch(epoch)
            theirs.set_epoch(epoch)
            assert list(ours) == list(theirs) and len(ours) == len(theirs), (rank, epoch)
        assert ours.total_size == theirs.total_size


@pytest.mark.parametrize("replicas, rank", [(2, 2), (2, -1), (0, 0)])
def test_bad_ranks_raise_as_pytorch(replicas, rank):
    with pytest.raises(ValueError) as theirs:
        TorchSampler(range(4), replicas, rank)
    with pytest.raises(ValueError) as ours:
        DistributedSampler(range(4), replicas, rank)
    assert str(ours.value) == str(theirs.value)


def test_without_a_process_group_it_raises_as_pytorch():
    with pytest.raises(ValueError) as theirs:
        TorchSampler(range(4))
    with pytest.raises(ValueError) as ours:
        DistributedSampler(range(4))
    assert str(ours.value) == str(theirs.value)
