"""The order statistics, searches, set ops and products PyTorch has and ggrad composes (ops/statistics.py,
search.py, tensor_products.py, calculus.py, float_parts.py, rotation.py): values, dtypes, gradients and
refusals against PyTorch."""

import math

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 5)).astype(np.float32)
TIES = np.array([[1, 3, 3, 0, 3], [2, 2, 1, 5, 5], [4, 0, 4, 4, 1]], np.float32)


def _pair(a, grad=False):
    return ggrad.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def _same(ours, theirs, rtol=1e-5, atol=1e-6):
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _same(o, t, rtol, atol)
        return
    assert ours.shape == tuple(theirs.shape), (ours.shape, theirs.shape)
    assert ours.dtype.torch_name == str(theirs.dtype).removeprefix("torch."), (ours.dtype, theirs.dtype)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol)


def _grads(fn, a, **kwargs):
    g, t = _pair(a, grad=True)
    o, r = fn(ggrad, g, **kwargs), fn(torch, t, **kwargs)
    o = o[0] if isinstance(o, tuple) else o
    r = r[0] if isinstance(r, tuple) else r
    w = RNG.standard_normal(tuple(r.shape)).astype(np.float32)
    (o * ggrad.tensor(w)).sum().backward()
    (r * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
@pytest.mark.parametrize("kwargs", [{}, dict(dim=1), dict(dim=0, keepdim=True, correction=0)])
def test_var_std_mean(name, kwargs):
    g, t = _pair(X)
    _same(getattr(ggrad, name)(g, **kwargs), getattr(torch, name)(t, **kwargs))


@pytest.mark.parametrize("data", [X, TIES, np.array([[1.0, np.nan, 3.0], [2.0, 0.0, 1.0]], np.float32)])
@pytest.mark.parametrize("name", ["median", "nanmedian"])
def test_median(data, name):
    g, t = _pair(data)
    _same(getattr(ggrad, name)(g), getattr(torch, name)(t))
    for dim, keepdim in ((1, False), (0, True), (-1, True)):
        ov, oi = getattr(ggrad, name)(g, dim, keepdim)
        tv, ti = getattr(torch, name)(t, dim, keepdim)
        _same(ov, tv)
        finite = ~np.isnan(tv.numpy())   # where values tie, PyTorch's index is one of them: check the value
        np.testing.assert_allclose(np.take_along_axis(data, np.expand_dims(oi.numpy(), dim) if not keepdim else
                                                      oi.numpy(), axis=dim).reshape(tv.shape)[finite],
                                   tv.numpy()[finite])
    if not np.isnan(data).any():
        _grads(lambda lib, x: getattr(lib, name)(x, 1)[0], data + np.arange(data.size, dtype=np.float32).reshape(
            data.shape) * 1e-3)


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
def test_quantile(interpolation, name):
    data = np.array([[1.0, np.nan, 3.0, 7.0], [2.0, 0.0, 1.0, -4.0], [0.5, 0.25, 9.0, 3.0]], np.float32)
    g, t = _pair(data)
    for q, kwargs in ((0.3, {}), (0.5, dict(dim=1)), (0.9, dict(dim=0, keepdim=True)),
                      ([0.1, 0.75], dict(dim=1, keepdim=True)), ([0.0, 1.0], {})):
        qo, qt = (ggrad.tensor(q), torch.tensor(q)) if isinstance(q, list) else (q, q)
        _same(getattr(ggrad, name)(g, qo, interpolation=interpolation, **kwargs),
              getattr(torch, name)(t, qt, interpolation=interpolation, **kwargs))
    _grads(lambda lib, x: getattr(lib, name)(x, 0.4, dim=1, interpolation=interpolation), X)
    for bad in (dict(q=1.5), dict(q=0.5, interpolation="bad")):
        with pytest.raises(RuntimeError) as theirs:
            torch.quantile(t, **bad)
        with pytest.raises(RuntimeError) as ours:
            ggrad.quantile(g, **bad)
        assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_cummin(name):
    data = np.array([[1, 3, 3, 0, 5], [2, np.nan, 1, 5, 5], [4, 0, 4, 4, 1]], np.float32)
    for a, dim in ((data, 1), (data, 0), (TIES, 1), (TIES.astype(np.int64), 1)):
        g, t = _pair(a)
        _same(getattr(ggrad, name)(g, dim), getattr(torch, name)(t, dim))
    _grads(lambda lib, x: getattr(lib, name)(x, 1), X)


def test_histc_and_bincount():
    data = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, -1.0, 9.0], np.float32)
    g, t = _pair(data)
    for kwargs in (dict(bins=4, min=0, max=3), dict(bins=5), dict(bins=3, min=1, max=1)):
        _same(ggrad.histc(g, **kwargs), torch.histc(t, **kwargs))
    ints = np.array([0, 3, 1, 3, 3, 7])
    gi, ti = _pair(ints)
    _same(ggrad.bincount(gi), torch.bincount(ti))
    _same(ggrad.bincount(gi, minlength=10), torch.bincount(ti, minlength=10))
    w = np.linspace(0.5, 3, 6).astype(np.float32)
    _same(ggrad.bincount(gi, ggrad.tensor(w)), torch.bincount(ti, torch.tensor(w)))
    with pytest.raises(RuntimeError):
        torch.bincount(torch.tensor([-1, 2]))
    with pytest.raises(RuntimeError, match="non-negative"):
        ggrad.bincount(ggrad.tensor([-1, 2]))


def test_bucketize_and_searchsorted():
    boundaries = np.array([1.0, 3.0, 5.0, 7.0], np.float32)
    values = np.array([[0.0, 1.0, 3.0], [6.0, 7.0, 9.0]], np.float32)
    gb, tb = _pair(boundaries)
    gv, tv = _pair(values)
    for right in (False, True):
        _same(ggrad.bucketize(gv, gb, right=right), torch.bucketize(tv, tb, right=right))
        _same(ggrad.searchsorted(gb, gv, right=right), torch.searchsorted(tb, tv, right=right))
    _same(ggrad.bucketize(gv, gb, out_int32=True), torch.bucketize(tv, tb, out_int32=True))
    rows = np.sort(RNG.standard_normal((2, 6)).astype(np.float32), axis=1)
    probe = RNG.standard_normal((2, 3)).astype(np.float32)
    _same(ggrad.searchsorted(ggrad.tensor(rows), ggrad.tensor(probe), side="right"),
          torch.searchsorted(torch.tensor(rows), torch.tensor(probe), side="right"))
    with pytest.raises(RuntimeError, match="opposites"):
        ggrad.searchsorted(gb, gv, right=True, side="left")


@pytest.mark.parametrize("kwargs", [{}, dict(return_inverse=True), dict(return_counts=True),
                                    dict(return_inverse=True, return_counts=True)])
def test_unique(kwargs):
    data = np.array([[3, 1, 3], [2, 1, 3]])
    g, t = _pair(data)
    _same(ggrad.unique(g, **kwargs), torch.unique(t, **kwargs))
    _same(ggrad.unique(g, dim=0, **kwargs), torch.unique(t, dim=0, **kwargs))
    runs = np.array([1, 1, 2, 2, 2, 1, 3, 3])
    g, t = _pair(runs)
    _same(ggrad.unique_consecutive(g, **kwargs), torch.unique_consecutive(t, **kwargs))
    _same(g.unique(**kwargs), t.unique(**kwargs))


def test_tensordot_kron_cdist():
    a, b = RNG.standard_normal((2, 3, 4)).astype(np.float32), RNG.standard_normal((3, 4, 5)).astype(np.float32)
    (ga, ta), (gb, tb) = _pair(a), _pair(b)
    _same(ggrad.tensordot(ga, gb, 2), torch.tensordot(ta, tb, 2), rtol=1e-4, atol=1e-5)
    _same(ggrad.tensordot(ga, gb, ([1, 2], [0, 1])), torch.tensordot(ta, tb, ([1, 2], [0, 1])), rtol=1e-4, atol=1e-5)
    _same(ggrad.tensordot(ga, gb, 0), torch.tensordot(ta, tb, 0), rtol=1e-4, atol=1e-5)
    _grads(lambda lib, x: lib.tensordot(x, lib.ones(4, 2), 1), a)
    m, n = RNG.standard_normal((2, 3)).astype(np.float32), RNG.standard_normal((3, 2, 2)).astype(np.float32)
    _same(ggrad.kron(*[ggrad.tensor(v) for v in (m, n)]), torch.kron(*[torch.tensor(v) for v in (m, n)]))
    _grads(lambda lib, x: lib.kron(x, lib.ones(2, 3)), m)
    p, q = RNG.standard_normal((2, 4, 3)).astype(np.float32), RNG.standard_normal((2, 5, 3)).astype(np.float32)
    for norm in (2.0, 1.0, 3.0, math.inf):
        _same(ggrad.cdist(ggrad.tensor(p), ggrad.tensor(q), p=norm), torch.cdist(torch.tensor(p), torch.tensor(q),
                                                                                   p=norm), rtol=1e-4, atol=1e-5)
    _grads(lambda lib, x: lib.cdist(x, lib.ones(1, 5, 3)), p[:1])


def test_trapezoid_rot90_copysign_frexp():
    y = RNG.standard_normal((3, 6)).astype(np.float32)
    xs = np.cumsum(RNG.random(6)).astype(np.float32)
    gy, ty = _pair(y)
    _same(ggrad.trapezoid(gy), torch.trapezoid(ty))
    _same(ggrad.trapezoid(gy, ggrad.tensor(xs)), torch.trapezoid(ty, torch.tensor(xs)))
    _same(ggrad.trapezoid(gy, dx=0.5, dim=0), torch.trapezoid(ty, dx=0.5, dim=0))
    _same(ggrad.trapz(gy, dx=2.0), torch.trapz(ty, dx=2.0))
    _same(ggrad.cumulative_trapezoid(gy, ggrad.tensor(xs)), torch.cumulative_trapezoid(ty, torch.tensor(xs)))
    _grads(lambda lib, x: lib.trapezoid(x, dx=0.3), y)
    for k in (-1, 0, 1, 2, 3, 5):
        for dims in ((0, 1), (1, 0)):
            _same(ggrad.rot90(gy, k, dims), torch.rot90(ty, k, dims))
    signs = np.array([1.0, -2.0, 0.0, -0.0, 3.0, np.inf], np.float32)
    mags = np.array([-1.5, 2.0, -3.0, 4.0, -0.0, 1.0], np.float32)
    _same(ggrad.copysign(ggrad.tensor(mags), ggrad.tensor(signs)), torch.copysign(torch.tensor(mags),
                                                                                 torch.tensor(signs)))
    _same(ggrad.copysign(ggrad.tensor([1, -2]), -1.0), torch.copysign(torch.tensor([1, -2]), -1.0))
    _grads(lambda lib, x: lib.copysign(x, lib.tensor([1.0, -1.0, 1.0, -1.0, 1.0])), X[0])
    f = np.array([8.0, 0.3, -5.5, 0.0, 1.0, 2.0 ** -20, 1e30, 0.75, 4.0 - 1e-6], np.float32)
    _same(ggrad.frexp(ggrad.tensor(f)), torch.frexp(torch.tensor(f)))
    with pytest.raises(RuntimeError, match="rotation dims"):
        ggrad.rot90(gy, 1, (0, 0))


@pytest.mark.parametrize("how", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(how, include_self):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    src = RNG.standard_normal((2, 4)).astype(np.float32)
    idx = np.array([[0, 1, 0, 2], [2, 2, 1, 0]])
    for dim, index in ((0, idx), (1, np.array([[3, 0, 3, 1], [1, 1, 0, 0]]))):
        (gx, tx), (gs, ts) = _pair(x, grad=True), _pair(src, grad=True)
        ours = ggrad.scatter_reduce(gx, dim, ggrad.tensor(index), gs, how, include_self=include_self)
        theirs = torch.scatter_reduce(tx, dim, torch.tensor(index), ts, how, include_self=include_self)
        _same(ours, theirs)
        w = RNG.standard_normal(x.shape).astype(np.float32)
        (ours * ggrad.tensor(w)).sum().backward()
        (theirs * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(gs.grad.numpy(), ts.grad.numpy(), rtol=1e-5, atol=1e-6)
    ints = np.array([[4, 7, 1], [2, 9, 3]])
    gi, ti = _pair(ints)
    _same(gi.scatter_reduce(1, ggrad.tensor([[0, 0, 2], [1, 1, 1]]), gi, how),
          ti.scatter_reduce(1, torch.tensor([[0, 0, 2], [1, 1, 1]]), ti, how))


def test_scatter_reduce_multiply_and_errors():
    g, t = _pair(np.ones(4, np.float32))
    _same(g.scatter(0, ggrad.tensor([0, 0, 3]), ggrad.tensor([2.0, 3.0, 4.0]), reduce="multiply"),
          t.scatter(0, torch.tensor([0, 0, 3]), torch.tensor([2.0, 3.0, 4.0]), reduce="multiply"))
    _same(g.scatter(0, ggrad.tensor([1]), 5.0, reduce="multiply"), t.scatter(0, torch.tensor([1]), 5.0,
                                                                             reduce="multiply"))
    with pytest.raises(RuntimeError):
        torch.scatter_reduce(t, 0, torch.tensor([0]), t, "median")
    with pytest.raises(RuntimeError, match="reduce argument"):
        ggrad.scatter_reduce(g, 0, ggrad.tensor([0]), g, "median")
    wide = ggrad.scatter_reduce(ggrad.zeros(2, 3), 1, ggrad.tensor([[2]]), ggrad.ones(1, 4), "sum")
    assert wide.tolist() == torch.scatter_reduce(torch.zeros(2, 3), 1, torch.tensor([[2]]), torch.ones(1, 4),
                                                 "sum").tolist()      # only index's extent of src is read
    with pytest.raises(RuntimeError):
        g.scatter(0, ggrad.tensor([0]), ggrad.tensor([2.0]), reduce="divide")
