"""The arranging, index- and window-building functions (ops/array_builders.py) and the smaller numeric ones
(ops/numeric_extras.py) against PyTorch: values, result dtypes and gradients."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((3, 4)).astype(np.float32)
V = RNG.standard_normal(4).astype(np.float32)


def _same(fn, *arrays, grad=True, rtol=1e-5, atol=1e-6):
    results = []
    for lib in (ggrad, torch):
        leaves = [lib.tensor(a, requires_grad=grad) for a in arrays]
        out = fn(lib, *leaves)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if grad:
            floats = [o for o in outs if o.dtype == lib.float32 and o.numel()]
            sum((o * lib.tensor(np.linspace(-1, 2, o.numel(), dtype=np.float32).reshape(tuple(o.shape)))).sum()
                for o in floats).backward()
        results.append([(o.detach().numpy(), str(o.dtype).split(".")[-1]) for o in outs] +
                       [(t.grad.numpy() if t.grad is not None else None, "grad") for t in leaves if grad])
    assert len(results[0]) == len(results[1])
    for (ours, our_dtype), (theirs, their_dtype) in zip(*results):
        assert our_dtype == their_dtype
        if theirs is None:
            assert ours is None or not np.any(ours)
            continue
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("name", ["atleast_1d", "atleast_2d", "atleast_3d"])
def test_atleast(name):
    for shape in ((), (4,), (2, 3), (2, 3, 4)):
        _same(lambda lib, x: getattr(lib, name)(x) * 1.0, RNG.standard_normal(shape).astype(np.float32))
    _same(lambda lib, x, y: getattr(lib, name)(x, y), A[0], B)


def test_stacks_and_splits():
    _same(lambda lib, x, y, v: lib.column_stack([x, y, v[:3]]), A, B, V)
    _same(lambda lib, x, y: lib.dstack([x, y]), A, B)
    x3 = RNG.standard_normal((4, 6, 4)).astype(np.float32)
    for name, sections in (("hsplit", 3), ("vsplit", [1, 3]), ("dsplit", 2), ("hsplit", [2])):
        _same(lambda lib, x: getattr(lib, name)(x, sections), x3)
        _same(lambda lib, x: getattr(x, name)(sections), x3)
    for lib in (ggrad, torch):
        with pytest.raises(RuntimeError, match="not divisible"):
            lib.hsplit(lib.ones(3, 5), 2)


def test_cartesian_prod_block_diag_diag_embed():
    _same(lambda lib, a, b: lib.cartesian_prod(a, b), V[:3], V)
    _same(lambda lib, a, b, c: lib.block_diag(a, b, c), A[:2, :3], V, B[:1, :2])
    for offset, dims in ((0, (-2, -1)), (2, (-2, -1)), (-1, (-2, -1)), (1, (0, 2))):
        _same(lambda lib, x: lib.diag_embed(x, offset, *dims), A)


@pytest.mark.parametrize("row, col, offset", [(4, 4, 0), (3, 5, 1), (5, 3, -2)])
def test_triangle_indices(row, col, offset):
    for name in ("tril_indices", "triu_indices"):
        ours, theirs = getattr(ggrad, name)(row, col, offset), getattr(torch, name)(row, col, offset)
        assert ours.dtype == ggrad.int64 and np.array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                  "kaiser_window"])
def test_windows(name):
    for length in (0, 1, 2, 7, 64):
        for periodic in (True, False):
            ours = getattr(ggrad, name)(length, periodic).numpy()
            theirs = getattr(torch, name)(length, periodic).numpy()
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_numeric_extras():
    _same(lambda lib, x, y: lib.hypot(x, y) + x.hypot(y), A, B)
    _same(lambda lib, x, y: lib.logaddexp2(x * 40, y) + x.logaddexp2(x), A, B)
    _same(lambda lib, x: lib.rad2deg(x) + x.deg2rad(), A)
    _same(lambda lib, x: lib.clone(x) * 2, A)
    _same(lambda lib, x: x.trace() + lib.trace(x * x), A)
    _same(lambda lib, x: lib.aminmax(x, dim=1) + tuple(x.aminmax()), A)
    _same(lambda lib, m, v, x: lib.addmv(x[:, 0], m, v, beta=0.5, alpha=2) + (m @ v).addmv(m, v), A[:, :4], V, B)
    _same(lambda lib, x, a, b: lib.addr(x, a[:3], b, beta=2, alpha=-1), A, V, V)
    _same(lambda lib, a, b: lib.chain_matmul(a, b.transpose(0, 1), a), A, B)
    signs = np.array([-1.0, -0.0, 0.0, 2.0, -np.inf], np.float32)
    _same(lambda lib, x: lib.signbit(x), signs, grad=False)
    _same(lambda lib, x, v: lib.heaviside(x, v), signs, np.full(5, 0.5, np.float32), grad=False)


def test_cov_and_corrcoef():
    x = RNG.standard_normal((3, 10)).astype(np.float32)
    _same(lambda lib, t: lib.cov(t), x)
    _same(lambda lib, t: lib.cov(t, correction=0), x)
    _same(lambda lib, t: t.cov(fweights=lib.arange(1, 11), aweights=lib.linspace(0.1, 1.0, 10)), x, rtol=2e-5)
    _same(lambda lib, t: lib.cov(t[0]), x)
    _same(lambda lib, t: lib.corrcoef(t) + t.corrcoef(), x, rtol=2e-5, atol=2e-6)
