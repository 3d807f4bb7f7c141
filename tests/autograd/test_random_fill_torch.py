"""In-place random fills (uniform_, normal_, exponential_, random_) as PyTorch's: shapes, dtypes, ranges and
moments, writes seen through views and by the base, a seeded `generator=` repeating its draws, and
PyTorch's errors for bad arguments. The streams themselves differ from PyTorch's (numpy's PCG64)."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")


def test_fills_keep_dtype_and_land_in_range():
    ggrad.manual_seed(0)
    u = ggrad.empty(20000).uniform_(-2.0, 3.0)
    assert u.dtype is ggrad.float32 and -2.0 <= float(u.min()) and float(u.max()) < 3.0
    assert abs(float(u.mean()) - 0.5) < 0.05
    n = ggrad.zeros(20000).half().normal_(mean=1.0, std=0.5)
    assert n.dtype is ggrad.float16
    assert abs(float(n.float().mean()) - 1.0) < 0.02 and abs(float(n.float().std()) - 0.5) < 0.02
    e = ggrad.empty(20000).exponential_(2.0)
    assert float(e.min()) >= 0 and abs(float(e.mean()) - 0.5) < 0.03
    r = ggrad.zeros(1000, dtype=ggrad.int64).random_(3, 7)
    assert r.dtype is ggrad.int64 and set(np.unique(r.numpy())) == {3, 4, 5, 6}


def test_a_view_fill_is_seen_by_the_base_and_data_fills_a_parameter():
    for T in (torch, ggrad):
        x = T.zeros(3, 4)
        x[1].uniform_(5.0, 6.0)
        assert (x[0] == 0).all() and (x[2] == 0).all() and (x[1] >= 5).all()
        p = T.nn.Parameter(T.zeros(2, 2))
        p.data.normal_(mean=0.0, std=0.02)
        assert p.requires_grad and float(p.detach().abs().sum()) > 0


@pytest.mark.parametrize("fill", ["uniform_", "normal_", "exponential_"])
def test_a_seeded_generator_repeats(fill):
    a = getattr(ggrad.empty(5), fill)(generator=ggrad.Generator().manual_seed(3))
    b = getattr(ggrad.empty(5), fill)(generator=ggrad.Generator().manual_seed(3))
    np.testing.assert_array_equal(a.numpy(), b.numpy())


BAD = {
    "uniform_str": lambda T: T.ones(3).uniform_("a"),
    "uniform_reversed": lambda T: T.ones(3).uniform_(2, 1),
    "uniform_int_tensor": lambda T: T.ones(2, dtype=T.long).uniform_(),
    "normal_negative_std": lambda T: T.ones(3).normal_(0, -1),
    "normal_int_tensor": lambda T: T.ones(2, dtype=T.long).normal_(),
    "normal_none_mean": lambda T: T.ones(3).normal_(None),
    "exponential_zero_rate": lambda T: T.ones(3).exponential_(0.0),
    "random_empty_range": lambda T: T.ones(3).random_(5, 5),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_arguments_raise_torchs_type(name):
    with pytest.raises(Exception) as theirs:
        BAD[name](torch)
    with pytest.raises(theirs.type):
        BAD[name](ggrad)
