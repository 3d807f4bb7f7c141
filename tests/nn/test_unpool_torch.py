"""MaxUnpool1d/2d against torch, fed by max_pool's return_indices: values, output_size, gradients, errors."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
import ggrad.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(13)


def _unpool_both(n, x, kernel, stride=None, padding=0, output_size=None):
    pool, unpool = f"max_pool{n}d", f"max_unpool{n}d"
    ours, theirs = ggrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yo, io = getattr(F, pool)(ours, kernel, stride, padding, return_indices=True)
    yt, it = getattr(TF, pool)(theirs, kernel, stride, padding, return_indices=True)
    uo = getattr(F, unpool)(yo, io, kernel, stride, padding, output_size)
    ut = getattr(TF, unpool)(yt, it, kernel, stride, padding, output_size)
    np.testing.assert_allclose(uo.numpy(), ut.detach().numpy(), rtol=1e-6)
    w = RNG.standard_normal(tuple(ut.shape)).astype(np.float32)
    (uo * ggrad.tensor(w)).sum().backward()
    (ut * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", [dict(kernel=2), dict(kernel=3, stride=2, padding=1), dict(kernel=2, output_size=(2, 3, 9)),
                                  dict(kernel=3, stride=2, output_size=(10,))])
def test_max_unpool1d_matches_torch(case):
    _unpool_both(1, RNG.standard_normal((2, 3, 9)).astype(np.float32), **case)


@pytest.mark.parametrize("shape, case", [((1, 2, 8, 8), dict(kernel=2)),
                                         ((2, 2, 7, 8), dict(kernel=(3, 2), stride=(2, 1), padding=(1, 0))),
                                         ((1, 2, 7, 9), dict(kernel=2, output_size=(7, 9))),
                                         ((1, 2, 7, 9), dict(kernel=2, stride=2, output_size=(1, 2, 7, 9)))])
def test_max_unpool2d_matches_torch(shape, case):
    _unpool_both(2, RNG.standard_normal(shape).astype(np.float32), **case)


def test_unbatched_input():
    _unpool_both(2, RNG.standard_normal((3, 6, 6)).astype(np.float32), 2)


def test_layers_match_torch():
    for n, args in ((1, (2,)), (2, (2,)), (2, (2, 1, (0, 1)))):
        ours, theirs = getattr(nn, f"MaxUnpool{n}d")(*args), getattr(torch.nn, f"MaxUnpool{n}d")(*args)
        assert repr(ours) == repr(theirs)
        assert ours.state_dict() == {}
    x = RNG.standard_normal((1, 1, 4, 6)).astype(np.float32)
    y, i = nn.MaxPool2d(2, return_indices=True)(ggrad.tensor(x))
    yt, it = torch.nn.MaxPool2d(2, return_indices=True)(torch.tensor(x))
    np.testing.assert_array_equal(nn.MaxUnpool2d(2)(y, i, output_size=(5, 7)).numpy(),
                                  torch.nn.MaxUnpool2d(2)(yt, it, output_size=(5, 7)).numpy())


def test_errors_as_torch():
    x = RNG.standard_normal((1, 1, 4, 4)).astype(np.float32)
    y, i = F.max_pool2d(ggrad.tensor(x), 2, return_indices=True)
    yt, it = TF.max_pool2d(torch.tensor(x), 2, return_indices=True)
    y.numpy(), i.numpy()   # computed first: a failed in-graph check fails the pending graph it is part of
    for lib, v, idx in ((F, y, i), (TF, yt, it)):
        with pytest.raises(ValueError, match="invalid output_size"):
            lib.max_unpool2d(v, idx, 2, output_size=(9, 9))
        with pytest.raises(ValueError, match="should be a sequence containing 2 or 4"):
            lib.max_unpool2d(v, idx, 2, output_size=(4,))
        with pytest.raises(RuntimeError, match="Found an invalid max index"):
            lib.max_unpool2d(v, idx * 10, 2).numpy()   # ours: found by the compute, as device values are
    for lib, v, idx in ((F, y, i), (TF, yt, it)):
        with pytest.raises(RuntimeError, match="Expected shape of indices to be same"):
            lib.max_unpool2d(v, idx[..., :1], 2)
