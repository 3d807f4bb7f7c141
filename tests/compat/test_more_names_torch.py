"""Names PyTorch scripts use that ggrad gained late in issue 34, against PyTorch: kthvalue, nanmean,
tensor_split, torch.cross, BatchNorm3d, InstanceNorm3d, LPPool1d/2d (values and gradients)."""

import warnings

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

X = np.random.default_rng(0).standard_normal((2, 3, 4, 5, 6)).astype(np.float32)


def _run(fn, *arrays):
    """fn(lib, *leaves) with both libraries: its outputs (a Tensor or a tuple) and the inputs' gradients of a
    weighted sum of the float outputs."""
    results = []
    for lib in (ggrad, torch):
        leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
        out = fn(lib, *leaves)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        floats = [o for o in outs if o.dtype in (lib.float32,)]
        total = sum((o * lib.tensor(np.linspace(-1, 1, o.numel(), dtype=np.float32).reshape(tuple(o.shape)))).sum()
                    for o in floats)
        total.backward()
        results.append([o.detach().numpy() for o in outs] + [t.grad.numpy() for t in leaves])
    assert len(results[0]) == len(results[1])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("k, dim, keepdim", [(1, -1, False), (3, 1, True), (4, 2, False)])
def test_kthvalue(k, dim, keepdim):
    _run(lambda lib, x: lib.kthvalue(x, k, dim, keepdim), X[0, :, :, 0])
    _run(lambda lib, x: x.kthvalue(k, dim=dim, keepdim=keepdim), X[0, :, :, 1])
    for lib in (ggrad, torch):
        with pytest.raises(RuntimeError, match="selected number k out of range"):
            lib.kthvalue(lib.ones(3), 4)


def test_nanmean():
    x = X[0, 0].copy()
    x[0, :3] = np.nan
    x[1, :] = np.nan
    for dim, keepdim in ((None, False), (1, False), (0, True)):
        results = []
        for lib in (ggrad, torch):
            t = lib.tensor(x, requires_grad=True)
            out = lib.nanmean(t) if dim is None else t.nanmean(dim, keepdim)
            lib.nan_to_num(out, nan=0.0).sum().backward()
            results.append((out.detach().numpy(), t.grad.numpy()))
        (ours, ours_grad), (theirs, theirs_grad) = results
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, equal_nan=True)
        # an all-nan row's 0/0 mean sends PyTorch's gradient nan (nan times its nansum's 0/1 mask); ours is 0 there
        finite = np.isfinite(theirs_grad)
        np.testing.assert_allclose(ours_grad[finite], theirs_grad[finite], rtol=1e-6)
        assert np.all(ours_grad[~finite] == 0)


@pytest.mark.parametrize("split", [3, 4, 7, [1, 5], [5, 2], (0, -2), [-9, 20]])
def test_tensor_split(split):
    _run(lambda lib, x: lib.tensor_split(x, split, dim=1), X[0, 0, :, :].reshape(4, 30)[:, :7].copy())
    assert len(ggrad.arange(7.).tensor_split(3)) == 3


def test_cross():
    a, b = X[0, :, :, 0].copy(), X[1, :, :, 0].copy()
    _run(lambda lib, x, y: lib.cross(x, y, dim=0), a, b)
    for lib in (ggrad, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.cross(lib.tensor(a), lib.tensor(b))
        assert any("without specifying the dim arg is deprecated" in str(w.message) for w in caught)


@pytest.mark.parametrize("name", ["BatchNorm3d", "InstanceNorm3d"])
def test_three_dimensional_normalisation(name):
    def fn(lib, x):
        lib.manual_seed(0)
        layer = getattr(lib.nn, name)(3, affine=True) if name == "InstanceNorm3d" else getattr(lib.nn, name)(3)
        train = layer(x)
        layer.eval()
        return train, layer(x * 0.5)
    _run(fn, X)
    with pytest.raises(Exception):
        ggrad.nn.BatchNorm3d(3)(ggrad.tensor(X[0]))


@pytest.mark.parametrize("p, kernel, stride", [(2, 2, None), (3.0, 3, 2), (1.5, (2, 3), (1, 2))])
def test_lp_pool(p, kernel, stride):
    x = np.abs(X[0, :, :, :, :]) + 0.1 if p != 2 else X[0]   # fractional powers of negative numbers are nan
    if isinstance(kernel, int):
        _run(lambda lib, t: lib.nn.LPPool1d(p, kernel, stride)(t), x.reshape(3, 4, 30))
        assert repr(ggrad.nn.LPPool1d(p, kernel, stride)) == repr(torch.nn.LPPool1d(p, kernel, stride))
    _run(lambda lib, t: lib.nn.functional.lp_pool2d(t, p, kernel, stride), x)
    _run(lambda lib, t: lib.nn.LPPool2d(p, kernel, stride, ceil_mode=True)(t), x)


def test_softmax2d_poisson_randint_like_multi_dot():
    _run(lambda lib, x: lib.nn.Softmax2d()(x), X[0, :, :, :, 0])
    ggrad.manual_seed(4)
    rates = ggrad.tensor([[0.5, 4.0], [10.0, 0.0]])
    draws = np.stack([ggrad.poisson(rates).numpy() for _ in range(3000)])
    np.testing.assert_allclose(draws.mean(0), rates.numpy(), rtol=0.06, atol=0.01)
    assert draws.dtype == np.float32 and np.all(draws == np.floor(draws)) and np.all(draws[:, 1, 1] == 0)
    like = ggrad.randint_like(ggrad.zeros(50, 2, dtype=ggrad.int64), 3, 7)
    assert like.dtype == ggrad.int64 and like.shape == (50, 2) and 3 <= like.numpy().min() <= like.numpy().max() < 7
    assert ggrad.randint_like(ggrad.zeros(4), 5).dtype == ggrad.float32
    _run(lambda lib, a, b, c: lib.linalg.multi_dot([a, b, c]), X[0, 0, :3, :4, 0], X[0, 0, :4, :5, 1], X[0, 1, 0, :5, 2])
