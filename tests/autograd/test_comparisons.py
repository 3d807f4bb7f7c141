"""Comparisons, logic and bitwise ops, any/all/nonzero, isclose/equal: bool results as PyTorch's."""

import operator

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")
A = np.array([1.0, NAN, INF, -INF, 2.0, 0.0, -0.0, 3.5], dtype=np.float32)
B = np.array([1.0, NAN, INF, INF, 3.0, -0.0, 1.0, NAN], dtype=np.float32)
COMPARE = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]


@pytest.mark.parametrize("op", COMPARE, ids=lambda o: o.__name__)
def test_comparisons_with_nan_inf_and_scalars(op):
    for other in (B, 1.0, INF, NAN, 2):
        g_other = ggrad.tensor(other) if isinstance(other, np.ndarray) else other
        t_other = torch.tensor(other) if isinstance(other, np.ndarray) else other
        out, ref = op(ggrad.tensor(A), g_other), op(torch.tensor(A), t_other)
        assert out.dtype is ggrad.bool
        np.testing.assert_array_equal(out.numpy(), ref.numpy())
    ints = np.array([1, -2, 3, 0])
    np.testing.assert_array_equal(op(ggrad.tensor(ints), 0).numpy(), op(torch.tensor(ints), 0).numpy())
    np.testing.assert_array_equal(op(2.5, ggrad.tensor(A)).numpy(), op(2.5, torch.tensor(A)).numpy())


def test_named_comparisons_and_hash():
    x = ggrad.tensor([1.0, 2.0, 3.0])
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        np.testing.assert_array_equal(getattr(x, name)(2.0).numpy(),
                                      getattr(torch.tensor([1.0, 2.0, 3.0]), name)(2.0).numpy())
        np.testing.assert_array_equal(getattr(ggrad, name)(x, 2.0).numpy(), getattr(x, name)(2.0).numpy())
    assert {x: 1}[x] == 1 and hash(x) == hash(x) and (x == None) is False  # noqa: E711
    assert not (x == 2.0).requires_grad


BOOLS = [np.array([True, False, True, False]), np.array([True, True, False, False])]
INTS = [np.array([5, -3, 12, 0, -7, 1 << 20]), np.array([3, 6, -1, 9, -2, 12345])]


@pytest.mark.parametrize("op", [operator.and_, operator.or_, operator.xor], ids=lambda o: o.__name__)
def test_bitwise_on_bool_and_ints(op):
    for a, b in (BOOLS, INTS):
        out, ref = op(ggrad.tensor(a), ggrad.tensor(b)), op(torch.tensor(a), torch.tensor(b))
        assert out.dtype is (ggrad.bool if a.dtype == bool else ggrad.int64)
        np.testing.assert_array_equal(out.numpy(), ref.numpy())
    np.testing.assert_array_equal(op(ggrad.tensor(INTS[0]), 6).numpy(), op(torch.tensor(INTS[0]), 6).numpy())
    with pytest.raises(RuntimeError):
        op(ggrad.tensor([1.0]), ggrad.tensor([1.0]))


def test_invert_and_logical_functions():
    for a in (BOOLS[0], INTS[0]):
        np.testing.assert_array_equal((~ggrad.tensor(a)).numpy(), (~torch.tensor(a)).numpy())
    with pytest.raises(TypeError):
        ~ggrad.tensor([1.0])
    f = np.array([0.0, 2.0, -1.0, 0.0], dtype=np.float32)
    for name in ("logical_and", "logical_or", "logical_xor"):
        out = getattr(ggrad, name)(ggrad.tensor(f), ggrad.tensor(BOOLS[1]))
        np.testing.assert_array_equal(out.numpy(), getattr(torch, name)(torch.tensor(f), torch.tensor(BOOLS[1])))
    np.testing.assert_array_equal(ggrad.logical_not(ggrad.tensor(f)).numpy(), torch.logical_not(torch.tensor(f)))


@pytest.mark.parametrize("op", [operator.mod, operator.floordiv], ids=lambda o: o.__name__)
def test_mod_and_floordiv(op):
    a, b = np.array([7, -7, 7, -7, 0]), np.array([3, 3, -3, -3, 5])
    for x, y in ((a, b), (a.astype(np.float32) + 0.5, b.astype(np.float32))):
        out, ref = op(ggrad.tensor(x), ggrad.tensor(y)), op(torch.tensor(x), torch.tensor(y))
        assert out.dtype.is_float == ref.dtype.is_floating_point
        np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(op(ggrad.tensor(a), 2).numpy(), op(torch.tensor(a), 2).numpy())
    np.testing.assert_array_equal(op(10, ggrad.tensor(b)).numpy(), op(10, torch.tensor(b)).numpy())


def test_any_all_count_nonzero_nonzero():
    x = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    g, t = ggrad.tensor(x), torch.tensor(x)
    for name in ("any", "all"):
        assert getattr(ggrad, name)(g).dtype is ggrad.bool
        assert getattr(ggrad, name)(g).item() == getattr(torch, name)(t).item()
        for dim in (0, 1):
            np.testing.assert_array_equal(getattr(g, name)(dim).numpy(), getattr(t, name)(dim).numpy())
    assert ggrad.count_nonzero(g).item() == 1 and ggrad.count_nonzero(g).dtype is ggrad.int64
    np.testing.assert_array_equal(ggrad.count_nonzero(g, 1).numpy(), torch.count_nonzero(t, 1).numpy())
    np.testing.assert_array_equal(g.nonzero().numpy(), t.nonzero().numpy())
    for ours, theirs in zip(g.nonzero(as_tuple=True), t.nonzero(as_tuple=True)):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_isclose_allclose_equal():
    a = np.array([1.0, 1.0 + 1e-6, INF, -INF, NAN, 1.0], dtype=np.float32)
    b = np.array([1.0, 1.0, INF, INF, NAN, 1.1], dtype=np.float32)
    for equal_nan in (False, True):
        np.testing.assert_array_equal(ggrad.isclose(ggrad.tensor(a), ggrad.tensor(b), equal_nan=equal_nan).numpy(),
                                      torch.isclose(torch.tensor(a), torch.tensor(b), equal_nan=equal_nan).numpy())
    assert ggrad.allclose(ggrad.tensor(a[:3]), ggrad.tensor(b[:3])) is True
    assert ggrad.allclose(ggrad.tensor(a), ggrad.tensor(b)) is False
    assert ggrad.equal(ggrad.tensor([1, 2]), ggrad.tensor([1.0, 2.0])) == torch.equal(torch.tensor([1, 2]),
                                                                                       torch.tensor([1.0, 2.0]))
    assert ggrad.equal(ggrad.tensor([1, 2]), ggrad.tensor([1, 2, 3])) is False


def test_float_tests_are_bool():
    x = np.array([1.0, NAN, INF, -INF], dtype=np.float32)
    for name in ("isnan", "isinf", "isfinite", "isposinf", "isneginf"):
        out = getattr(ggrad, name)(ggrad.tensor(x))
        assert out.dtype is ggrad.bool
        np.testing.assert_array_equal(out.numpy(), getattr(torch, name)(torch.tensor(x)).numpy())
