"""ggrad.linalg and the vector norms against torch.linalg: values and gradients, zero vectors and zero
elements included (where the naive compositions give nan), negative orders, and the errors."""

import math

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

VECTORS = ([3.0, -4.0, 0.0], [0.0, 0.0, 0.0], [1.0, 2.0, -2.0], [0.5, -0.25, 4.0])
ORDS = (2, 1, 3, 0.5, 1.5, -1, -2, -0.5, math.inf, -math.inf)


def _both(data):
    return (ggrad.tensor(np.asarray(data, np.float32), requires_grad=True),
            torch.tensor(np.asarray(data, np.float32), requires_grad=True))


def _check(g_out, t_out, gx, tx):
    np.testing.assert_allclose(g_out.numpy(), t_out.detach().numpy(), rtol=1e-5, atol=1e-6)
    g_out.sum().backward()
    t_out.sum().backward()
    np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("ord_", ORDS)
@pytest.mark.parametrize("data", VECTORS)
def test_vector_norm_values_and_gradients(data, ord_):
    gx, tx = _both(data)
    _check(ggrad.linalg.vector_norm(gx, ord_), torch.linalg.vector_norm(tx, ord_), gx, tx)


@pytest.mark.parametrize("ord_", (3, -1, 0.5))
def test_vector_norm_over_a_dim_with_a_zero_row(ord_):
    data = [[0.0, 0.0, 0.0], [1.0, -2.0, 0.0], [2.0, 0.5, 1.0]]
    gx, tx = _both(data)
    _check(ggrad.linalg.vector_norm(gx, ord_, dim=1, keepdim=True),
           torch.linalg.vector_norm(tx, ord_, dim=1, keepdim=True), gx, tx)


def test_zero_order_counts_and_leaves_no_gradient():
    gx, tx = _both([3.0, 0.0, -1.0])
    g_out, t_out = ggrad.linalg.vector_norm(gx, 0), torch.linalg.vector_norm(tx, 0)
    assert g_out.item() == t_out.item() == 2.0
    g_out.backward()
    t_out.backward()
    assert gx.grad is None and tx.grad is None


@pytest.mark.parametrize("ord_", ("fro", 1, -1, math.inf, -math.inf))
def test_matrix_norm(ord_):
    data = np.arange(-6, 6, dtype=np.float32).reshape(2, 2, 3) / 3
    gx, tx = _both(data)
    _check(ggrad.linalg.matrix_norm(gx, ord_), torch.linalg.matrix_norm(tx, ord_), gx, tx)
    gx, tx = _both(data)
    _check(ggrad.linalg.matrix_norm(gx, ord_, dim=(0, 2), keepdim=True),
           torch.linalg.matrix_norm(tx, ord_, dim=(0, 2), keepdim=True), gx, tx)


@pytest.mark.parametrize("kwargs", ({}, {"ord": 1}, {"dim": 1}, {"dim": (0, 1)}, {"ord": math.inf},
                                    {"ord": 3, "dim": 0}, {"ord": "fro"}))
def test_norm_dispatches_as_torch(kwargs):
    data = np.array([[1.0, -2.0, 3.0], [0.5, 0.0, -4.0]], np.float32)
    gx, tx = _both(data)
    _check(ggrad.linalg.norm(gx, **kwargs), torch.linalg.norm(tx, **kwargs), gx, tx)


def test_vecdot_and_cross():
    a = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], np.float32)
    b = np.array([[0.5, -1.0, 2.0]], np.float32)
    ga, ta = _both(a)
    gb, tb = _both(b)
    _check(ggrad.linalg.vecdot(ga, gb), torch.linalg.vecdot(ta, tb), ga, ta)
    ga, ta = _both(a)
    gb, tb = _both(np.repeat(b, 2, 0))
    _check(ggrad.linalg.cross(ga, gb), torch.linalg.cross(ta, tb), ga, ta)
    np.testing.assert_allclose(gb.grad.numpy(), tb.grad.numpy(), rtol=1e-5)


def test_errors_as_torch():
    x = ggrad.ones(2, 3)
    tx = torch.ones(2, 3)
    for g_call, t_call in ((lambda: ggrad.linalg.matrix_norm(ggrad.ones(3)), lambda: torch.linalg.matrix_norm(torch.ones(3))),
                           (lambda: ggrad.linalg.norm(ggrad.ones(2, 2, 2), 1), lambda: torch.linalg.norm(torch.ones(2, 2, 2), 1)),
                           (lambda: ggrad.linalg.cross(x.T, x.T), lambda: torch.linalg.cross(tx.T, tx.T)),
                           (lambda: ggrad.linalg.vector_norm(x, "a"), lambda: torch.linalg.vector_norm(tx, "a"))):
        with pytest.raises(Exception) as theirs:
            t_call()
        with pytest.raises(theirs.type):
            g_call()
    # the norms on singular values (computed on the host): test_linalg_host_torch.py
    np.testing.assert_allclose(ggrad.linalg.matrix_norm(x, "nuc").item(), torch.linalg.matrix_norm(tx, "nuc").item(),
                               rtol=1e-6)
