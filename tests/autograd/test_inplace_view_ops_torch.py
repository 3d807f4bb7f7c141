"""t_, transpose_, swapdims_, swapaxes_, squeeze_, unsqueeze_: the tensor object becomes the view, as
PyTorch's; storage, earlier views, writes and gradients compared with PyTorch running the same code."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

A = np.arange(6.0, dtype=np.float32).reshape(2, 3)
W = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)


def values(t):
    return t.detach().numpy()


def _earlier_view_and_write(T):
    b = T.tensor(A, requires_grad=True)
    c = b * 1.0
    v = c[0]                       # a view taken before c changes its layout
    c.t_()
    c[1, 0] = 7.0                  # storage element (0, 1): v sees it
    (c * T.tensor(W)).sum().backward()
    return tuple(c.shape), c.stride(), c.is_contiguous(), c._base is None, values(v), values(c), b.grad.numpy()


def _view_becomes_view(T):
    x = T.zeros(2, 3)
    y = x[0]
    y.unsqueeze_(0)
    y.fill_(1.0)
    return tuple(y.shape), y._base is x, values(x)


def _chain(T):
    x = T.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 1, 3))
    shapes = []
    for op, args in (("squeeze_", ()), ("unsqueeze_", (-1,)), ("swapdims_", (0, 1)), ("swapaxes_", (0, 2)),
                     ("transpose_", (0, 1)), ("squeeze_", (1,)), ("t_", ())):
        assert getattr(x, op)(*args) is x
        shapes.append((tuple(x.shape), x.stride(), values(x).tolist()))
    return shapes


def _leaf_under_no_grad(T):
    a = T.tensor(A, requires_grad=True)
    with T.no_grad():
        a.t_()
    (a * T.tensor(W)).sum().backward()
    return tuple(a.shape), a.is_leaf, a.requires_grad, a.grad.numpy()


def _base_with_grad(T):
    b = T.tensor(A.reshape(2, 3, 1), requires_grad=True)
    c = b + 0.5
    c.squeeze_(-1).transpose_(0, 1)
    d = c[1:]                      # a view of the changed tensor
    d.mul_(2.0)
    (c * T.tensor(W)).sum().backward()
    return values(c), d._base is c, b.grad.numpy()


@pytest.mark.parametrize("case", [_earlier_view_and_write, _view_becomes_view, _chain, _leaf_under_no_grad,
                                  _base_with_grad])
def test_same_as_torch(case):
    got, want = case(ggrad), case(torch)
    for g, w in zip(got, want):
        if isinstance(w, np.ndarray):
            np.testing.assert_allclose(g, w, rtol=1e-6)
        else:
            assert g == w


def test_saved_output_changed_in_place_raises_as_torch():
    for T in (ggrad, torch):
        c = T.ones(2, 3, 1, requires_grad=True).exp()   # exp saves its output
        c.squeeze_(-1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            c.sum().backward()


def test_errors_as_torch():
    for T in (ggrad, torch):
        with pytest.raises(RuntimeError, match="leaf Variable"):
            T.tensor(A, requires_grad=True).t_()
        with pytest.raises(RuntimeError, match="2 dimensions"):
            T.zeros(2, 2, 2).t_()
        with pytest.raises(IndexError):
            T.zeros(2, 3).transpose_(0, 2)
