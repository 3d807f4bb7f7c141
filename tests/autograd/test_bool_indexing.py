"""Boolean-mask indexing and assignment, index_put_, and masked_fill/where's mask rules, against torch."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

X = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)


def pair():
    return ggrad.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)


def test_mask_select_and_its_gradient():
    g, t = pair()
    for gm, tm in ((g > 0, t > 0), ((g > 0).any(1), (t > 0).any(1))):
        out, ref = g[gm], t[tm]
        np.testing.assert_array_equal(out.numpy(), ref.detach().numpy())
        (out * 2.0).sum().backward()
        (ref * 2.0).sum().backward()
    np.testing.assert_array_equal(g.grad.numpy(), t.grad.numpy())
    with pytest.raises(IndexError, match="shape of the mask"):
        g[ggrad.tensor([True, False])]


def test_mask_assignment_as_in_top_k_sampling():
    g, t = pair()
    gy, ty = g * 1.0, t * 1.0
    kth = float(np.sort(X, axis=None)[5])
    gy[gy < kth] = -float("inf")
    ty[ty < kth] = -float("inf")
    np.testing.assert_array_equal(gy.numpy(), ty.detach().numpy())
    gy.exp().sum().backward()
    ty.exp().sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-6)


def test_mask_assignment_of_one_value_per_element():
    g, t = pair()
    v = np.arange(int((X > 0).sum()), dtype=np.float32)
    gv, tv = ggrad.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
    gy, ty = g * 1.0, t * 1.0
    gy[gy > 0] = gv
    ty[ty > 0] = tv
    np.testing.assert_array_equal(gy.numpy(), ty.detach().numpy())
    (gy * gy).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(gv.grad.numpy(), tv.grad.numpy())
    np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(accumulate):
    rows, cols = np.array([0, 2, 2]), np.array([1, 3, 3])
    vals = np.array([1.5, -2.0, 4.0], dtype=np.float32)
    if not accumulate:
        rows, cols, vals = rows[:2], cols[:2], vals[:2]   # duplicates without accumulate: PyTorch leaves it open
    g = ggrad.tensor(X).index_put_((ggrad.tensor(rows), ggrad.tensor(cols)), ggrad.tensor(vals), accumulate)
    t = torch.tensor(X).index_put_((torch.tensor(rows), torch.tensor(cols)), torch.tensor(vals), accumulate)
    np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-6)
    g = ggrad.tensor(X).index_put_((ggrad.tensor([2, 0]),), ggrad.tensor(7.0))
    t = torch.tensor(X).index_put_((torch.tensor([2, 0]),), torch.tensor(7.0))
    np.testing.assert_array_equal(g.numpy(), t.numpy())


def test_masked_fill_and_where_take_bool_masks_only():
    x = ggrad.tensor(X)
    with pytest.raises(TypeError):
        x.masked_fill(True, 0.0)
    with pytest.raises(RuntimeError, match="boolean"):
        x.masked_fill(ggrad.tensor([1.0, 0.0, 1.0, 0.0]), 0.0)
    with pytest.raises(RuntimeError, match="boolean"):
        ggrad.where(ggrad.tensor(X), x, 0.0)
    causal = ggrad.tensor(np.tril(np.ones((4, 4))))
    out = ggrad.tensor(np.ones((4, 4), np.float32)).masked_fill(causal == 0, -float("inf"))
    ref = torch.ones(4, 4).masked_fill(torch.tril(torch.ones(4, 4)) == 0, -float("inf"))
    np.testing.assert_array_equal(out.numpy(), ref.numpy())
    ints = ggrad.tensor([1, 2, 3]).masked_fill(ggrad.tensor([True, False, True]), 9)
    assert ints.dtype is ggrad.int64 and ints.tolist() == [9, 2, 9]
