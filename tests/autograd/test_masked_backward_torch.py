"""Ops whose value or gradient is picked by a mask, against PyTorch at ties, signed zeros, infinities and
nan: relu-like activations, clamp (number and tensor bounds), where, masked_fill, maximum/minimum (nan
propagates, ties split the gradient) and fmax/fmin (nan ignored, ties to the first)."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

INF, NAN = np.inf, np.nan
A = np.array([-INF, -2, -1, -0.0, 0.0, 0.5, 1, 2, 3, 6, INF, NAN, NAN, 7], np.float32)
B = np.array([-INF, 1, -1, 0.0, -0.0, 0.5, NAN, 3, -1, 6, INF, 1, NAN, INF], np.float32)
G = np.arange(1, A.size + 1, dtype=np.float32)


def run(lib, fn, arrays):
    xs = [lib.tensor(a, requires_grad=True) for a in arrays]
    y = fn(lib, *xs)
    y.backward(lib.tensor(G[:y.numel()].reshape(tuple(y.shape))))
    return y.detach().numpy(), [None if x.grad is None else x.grad.numpy() for x in xs]


def check(fn, *arrays):
    got_y, got_g = run(ggrad, fn, arrays)
    want_y, want_g = run(torch, fn, arrays)
    np.testing.assert_allclose(got_y, want_y, rtol=1e-5, atol=0, equal_nan=True)
    for got, want in zip(got_g, want_g):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=0, equal_nan=True)


UNARY = {
    "relu": lambda m, x: m.nn.functional.relu(x),
    "relu6": lambda m, x: m.nn.functional.relu6(x),
    "leaky_relu": lambda m, x: m.nn.functional.leaky_relu(x, 0.1),
    "hardtanh": lambda m, x: m.nn.functional.hardtanh(x, -1.0, 2.0),
    "clamp": lambda m, x: x.clamp(-1, 2),
    "clamp_tie": lambda m, x: x.clamp(0.5, 0.5),
    "clamp_min": lambda m, x: x.clamp(min=0),
    "clamp_max": lambda m, x: x.clamp(max=0.5),
    "threshold": lambda m, x: m.nn.functional.threshold(x, 0.5, -3.0),
    "masked_fill": lambda m, x: x.masked_fill(x > 0.5, 0.0),
    "masked_fill_nan": lambda m, x: x.masked_fill(x < 0, float("nan")),
    "where_self": lambda m, x: m.where(x > 0, x, x * 2),
    "hardsigmoid": lambda m, x: m.nn.functional.hardsigmoid(x),
    "hardswish": lambda m, x: m.nn.functional.hardswish(x),
    "elu": lambda m, x: m.nn.functional.elu(x),
    "celu": lambda m, x: m.nn.functional.celu(x, 0.5),
    "prelu": lambda m, x: m.nn.functional.prelu(x, m.tensor([0.25])),
    "softplus_beta": lambda m, x: m.nn.functional.softplus(x, beta=2, threshold=1),
    "maximum_self": lambda m, x: m.maximum(x, x),
    "minimum_self": lambda m, x: m.minimum(x, x),
    "fmax_self": lambda m, x: m.fmax(x, x),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_masked_ops_as_torch(name):
    check(UNARY[name], A)


BINARY = {
    "maximum": lambda m, a, b: m.maximum(a, b),
    "minimum": lambda m, a, b: m.minimum(a, b),
    "max_of_two": lambda m, a, b: m.max(a, b),
    "min_method": lambda m, a, b: a.min(b),
    "fmax": lambda m, a, b: m.fmax(a, b),
    "fmin": lambda m, a, b: m.fmin(a, b),
    "where": lambda m, a, b: m.where(a > b, a, b),
    "clamp_tensor_min": lambda m, a, b: a.clamp(min=b),
    "clamp_tensor_max": lambda m, a, b: m.clamp(a, max=b),
    "clamp_tensor_both": lambda m, a, b: m.clamp(a, min=b, max=b * 0 + 2),
    "clamp_tensor_tied_bounds": lambda m, a, b: m.clamp(a, min=b, max=b),
    "clamp_tensor_crossed_bounds": lambda m, a, b: m.clamp(a, min=b * 0 + 3, max=b),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_masked_ops_as_torch(name):
    check(BINARY[name], A, B)
    check(BINARY[name], B, A)


@pytest.mark.parametrize("op", ["maximum", "minimum", "fmax", "fmin"])
def test_broadcast_extrema_sum_the_gradient_as_torch(op):
    a = np.array([[1.0, 2.0, NAN], [0.0, 2.0, -1.0]], np.float32)
    b = np.array([2.0, 2.0, 0.0], np.float32)
    check(lambda m, x, y: getattr(m, op)(x, y), a, b)


def test_extrema_keep_integer_dtypes_and_refuse_numbers_as_torch():
    a, b = ggrad.tensor([1, 5, -3]), ggrad.tensor([2, 2, -3])
    got = ggrad.maximum(a, b)
    assert got.dtype is ggrad.int64 and got.tolist() == torch.maximum(torch.tensor([1, 5, -3]),
                                                                      torch.tensor([2, 2, -3])).tolist()
    for lib in (torch, ggrad):
        with pytest.raises(TypeError):
            lib.maximum(lib.tensor([1.0]), 2.0)


def test_double_backward_through_maximum_and_clamp():
    results = []
    for lib in (torch, ggrad):
        x = lib.tensor(np.array([0.5, -1.0, 2.0, 1.0], np.float32), requires_grad=True)
        y = (lib.maximum(x * x, x) + x.clamp(-0.5, 1.5) * x).sum()
        g, = lib.autograd.grad(y, x, create_graph=True)
        g2, = lib.autograd.grad(g.sum(), x)
        results.append((g.detach().numpy(), g2.numpy()))
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=1e-6)
