"""ggrad.utils.data against torch.utils.data: batch contents, orders, lengths, collation, errors."""

import collections

import numpy as np
import pytest

import ggrad
from ggrad.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset, IterableDataset, RandomSampler,
                              Subset, TensorDataset, default_collate, random_split)

torch = pytest.importorskip("torch")
tdata = torch.utils.data


def _arrays(n=10):
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, 3)).astype(np.float32), np.arange(n, dtype=np.int32)


@pytest.mark.parametrize("batch_size, drop_last", [(1, False), (3, False), (3, True), (10, False), (4, True)])
def test_sequential_batches_match_torch(batch_size, drop_last):
    x, y = _arrays()
    ours = DataLoader(TensorDataset(ggrad.tensor(x), ggrad.tensor(y)), batch_size=batch_size, drop_last=drop_last)
    theirs = tdata.DataLoader(tdata.TensorDataset(torch.tensor(x), torch.tensor(y)), batch_size=batch_size,
                              drop_last=drop_last)
    assert len(ours) == len(theirs)
    got, want = list(ours), list(theirs)
    assert len(got) == len(want)
    for (gx, gy), (tx, ty) in zip(got, want):
        np.testing.assert_array_equal(gx.numpy(), tx.numpy())
        np.testing.assert_array_equal(gy.numpy(), ty.numpy())
        assert gx.dtype == ggrad.float32


def test_shuffle_is_a_permutation_reproducible_by_generator_and_by_manual_seed():
    x, y = _arrays(23)
    ds = TensorDataset(ggrad.tensor(x), ggrad.tensor(y))

    def order(loader):
        return np.concatenate([b[1].numpy() for b in loader])
    a = order(DataLoader(ds, batch_size=5, shuffle=True, generator=ggrad.Generator().manual_seed(3)))
    b = order(DataLoader(ds, batch_size=5, shuffle=True, generator=ggrad.Generator().manual_seed(3)))
    np.testing.assert_array_equal(a, b)
    assert sorted(a.tolist()) == list(range(23)) and a.tolist() != list(range(23))
    loader = DataLoader(ds, batch_size=5, shuffle=True, generator=ggrad.Generator().manual_seed(3))
    assert order(loader).tolist() != order(loader).tolist()   # each pass a new order
    ggrad.manual_seed(11)
    c = order(DataLoader(ds, batch_size=5, shuffle=True))
    ggrad.manual_seed(11)
    np.testing.assert_array_equal(c, order(DataLoader(ds, batch_size=5, shuffle=True)))
    # rows stay together when shuffled
    for bx, by in DataLoader(ds, batch_size=4, shuffle=True):
        np.testing.assert_array_equal(bx.numpy(), x[by.numpy()])


class Squares(Dataset):
    def __len__(self):
        return 7

    def __getitem__(self, i):
        if not 0 <= i < 7:
            raise IndexError(i)
        return {"x": np.full(2, i, np.float32), "y": i * i, "name": f"s{i}"}


class TorchSquares(tdata.Dataset):
    def __len__(self):
        return 7

    def __getitem__(self, i):
        return {"x": np.full(2, i, np.float32), "y": i * i, "name": f"s{i}"}


def test_collation_of_dicts_arrays_numbers_strings_matches_torch():
    got = list(DataLoader(Squares(), batch_size=3))
    want = list(tdata.DataLoader(TorchSquares(), batch_size=3))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g["x"].numpy(), w["x"].numpy())
        np.testing.assert_array_equal(g["y"].numpy(), w["y"].numpy())
        assert g["name"] == w["name"]


def test_default_collate_structures_as_torch():
    Point = collections.namedtuple("Point", "a b")
    for batch in ([(1, 2.5), (3, 4.5)], [[1, 2], [3, 4]], [Point(1, 2.0), Point(3, 4.0)]):
        ours, theirs = default_collate(batch), tdata.default_collate(batch)
        assert type(ours) is type(theirs)
        for o, t in zip(ours, theirs):
            np.testing.assert_allclose(o.numpy(), t.numpy())
    stacked = default_collate([ggrad.tensor([1.0, 2.0]), ggrad.tensor([3.0, 4.0])])
    np.testing.assert_array_equal(stacked.numpy(), [[1, 2], [3, 4]])
    with pytest.raises(TypeError, match="default_collate"):
        default_collate([object(), object()])


def test_batch_size_none_and_custom_samplers():
    x, y = _arrays(6)
    ds = TensorDataset(ggrad.tensor(x), ggrad.tensor(y))
    singles = list(DataLoader(ds, batch_size=None))
    assert len(singles) == 6 and singles[2][0].shape == (3,)
    bs = BatchSampler(range(6), batch_size=4, drop_last=False)
    assert list(bs) == list(tdata.BatchSampler(range(6), batch_size=4, drop_last=False))
    batches = list(DataLoader(ds, batch_sampler=[[5, 0], [1, 2, 3]]))
    assert [b[1].numpy().tolist() for b in batches] == [[5, 0], [1, 2, 3]]
    sampler = RandomSampler(ds, replacement=True, num_samples=20, generator=ggrad.Generator().manual_seed(0))
    drawn = list(sampler)
    assert len(drawn) == 20 and all(0 <= i < 6 for i in drawn)


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(7))


def test_iterable_dataset_batches():
    got = [b.numpy().tolist() for b in DataLoader(Stream(), batch_size=3)]
    assert got == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.numpy().tolist() for b in DataLoader(Stream(), batch_size=3, drop_last=True)] == [[0, 1, 2],
                                                                                                 [3, 4, 5]]
    with pytest.raises(ValueError, match="IterableDataset"):
        DataLoader(Stream(), shuffle=True)


def test_subset_concat_random_split():
    x, y = _arrays(10)
    ds = TensorDataset(ggrad.tensor(x), ggrad.tensor(y))
    assert Subset(ds, [4, 2])[1][1].item() == 2
    both = ConcatDataset([ds, ds])
    assert len(both) == 20 and both[13][1].item() == 3 and both[-1][1].item() == 9
    a, b = random_split(ds, [7, 3], generator=ggrad.Generator().manual_seed(0))
    assert len(a) == 7 and len(b) == 3
    assert sorted(a.indices + b.indices) == list(range(10))
    assert [len(s) for s in random_split(ds, [0.5, 0.5])] == [5, 5]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(ds, [3, 3])


@pytest.mark.parametrize("kwargs, message", [
    (dict(batch_size=0), "batch_size should be a positive integer"),
    (dict(sampler=[0, 1], shuffle=True), "mutually exclusive with shuffle"),
    (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive"),
])
def test_bad_options_raise_as_torch(kwargs, message):
    x, y = _arrays(4)
    with pytest.raises(ValueError, match=message):
        DataLoader(TensorDataset(ggrad.tensor(x), ggrad.tensor(y)), **kwargs)
    with pytest.raises(ValueError, match=message):
        tdata.DataLoader(tdata.TensorDataset(torch.tensor(x), torch.tensor(y)), **kwargs)


def test_tensor_dataset_checks_sizes_and_trains_a_model():
    with pytest.raises(ValueError, match="Size mismatch"):
        TensorDataset(ggrad.zeros(3, 2), ggrad.zeros(4))
    ggrad.manual_seed(0)
    x = np.random.default_rng(1).standard_normal((64, 4)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5, 3.0], np.float32))[:, None]
    model = ggrad.nn.Linear(4, 1)
    opt = ggrad.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(ggrad.tensor(x), ggrad.tensor(y)), batch_size=16, shuffle=True)
    for _ in range(30):
        for bx, by in loader:
            opt.zero_grad()
            loss = ggrad.nn.functional.mse_loss(model(bx), by)
            loss.backward()
            opt.step()
    assert loss.item() < 1e-3


def test_generator_api():
    g = ggrad.Generator()
    assert g.manual_seed(5) is g and g.initial_seed() == 5
    assert isinstance(g.seed(), int) and g.initial_seed() != 5
    with pytest.raises(TypeError):
        g.manual_seed("5")
    with pytest.raises(TypeError, match="ggrad.Generator"):
        list(DataLoader(Squares(), shuffle=True, generator=np.random.default_rng(0)))


def test_tensor_dataset_batches_follow_in_place_changes_and_subclass_items():
    x = ggrad.zeros(4, 2)
    ds = TensorDataset(x)
    assert next(iter(DataLoader(ds, batch_size=2)))[0].numpy().tolist() == [[0, 0], [0, 0]]
    x.copy_(ggrad.ones(4, 2))
    assert next(iter(DataLoader(ds, batch_size=2)))[0].numpy().tolist() == [[1, 1], [1, 1]]

    class Scaled(TensorDataset):
        def __getitem__(self, i):
            return (self.tensors[0][i] * 100,)
    got = next(iter(DataLoader(Scaled(ggrad.tensor(np.arange(4, dtype=np.float32))), batch_size=2)))
    assert got[0].numpy().tolist() == [0, 100]


def test_manual_seed_seeds_the_default_generator():
    ggrad.manual_seed(123)
    torch.manual_seed(123)
    assert ggrad.initial_seed() == torch.initial_seed() == 123
    assert isinstance(ggrad.default_generator, ggrad.Generator)
    first = ggrad.randn(4).numpy()
    ggrad.default_generator.manual_seed(123)   # the same stream as ggrad.manual_seed
    np.testing.assert_array_equal(ggrad.randn(4).numpy(), first)
