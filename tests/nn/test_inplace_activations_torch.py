"""`inplace=True` on the activation layers and functions (and Dropout) as PyTorch's: the input Tensor itself
takes the result and is returned, later reads see it, gradients flow through it, an op recorded before
keeps the old value, and a leaf that requires grad refuses it; F.relu_ and the other in-place forms."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
import ggrad.nn.functional as F

torch = pytest.importorskip("torch")
from torch_parity_util import randn  # noqa: E402  (needs torch)

LAYERS = {
    "ReLU": (), "ReLU6": (), "LeakyReLU": (0.2,), "ELU": (0.7,), "CELU": (1.3,), "SELU": (), "SiLU": (),
    "Mish": (), "Hardtanh": (-0.5, 0.8), "Hardsigmoid": (), "Hardswish": (), "Threshold": (0.1, -2.0),
}


def run(make, lib):
    """y = 2x (not a leaf), a = exp(y) recorded before, act(y) in place; returns (returned is y, y, grad)."""
    x = lib.tensor(np.linspace(-4, 4, 24, dtype=np.float32).reshape(4, 6) + 0.05, requires_grad=True)
    y = x * 2
    before = y.exp()
    out = make(y)
    returned_self = out is y
    ((y * lib.tensor(randn_fixed())).sum() + before.sum() * 1e-3).backward()
    return returned_self, y.detach().numpy(), x.grad.numpy()


def randn_fixed():
    return np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)


def check(ours, theirs):
    same_ours, y_ours, g_ours = ours
    same_theirs, y_theirs, g_theirs = theirs
    assert same_ours and same_theirs
    np.testing.assert_allclose(y_ours, y_theirs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g_ours, g_theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list(LAYERS))
def test_layers_write_their_input(name):
    args = LAYERS[name]
    check(run(getattr(nn, name)(*args, inplace=True), ggrad), run(getattr(torch.nn, name)(*args, inplace=True), torch))


FUNCTIONS = {"relu": (), "relu6": (), "leaky_relu": (0.2,), "elu": (0.7,), "selu": (), "celu": (1.3,),
             "silu": (), "mish": (), "hardtanh": (-0.5, 0.8), "hardsigmoid": (), "hardswish": (),
             "threshold": (0.1, -2.0)}


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_functions_write_their_input(name):
    args = FUNCTIONS[name]
    check(run(lambda y: getattr(F, name)(y, *args, inplace=True), ggrad),
          run(lambda y: getattr(torch.nn.functional, name)(y, *args, inplace=True), torch))


@pytest.mark.parametrize("name", ["relu_", "elu_", "leaky_relu_", "hardtanh_", "celu_", "selu_", "threshold_"])
def test_underscore_forms(name):
    args = (0.1, -2.0) if name == "threshold_" else ()
    check(run(lambda y: getattr(F, name)(y, *args), ggrad),
          run(lambda y: getattr(torch.nn.functional, name)(y, *args), torch))


@pytest.mark.parametrize("name", ["relu", "elu", "hardtanh"])
def test_out_of_place_leaves_the_input(name):
    x = ggrad.tensor(randn(3, 4))
    before = x.numpy().copy()
    out = getattr(F, name)(x)
    assert out is not x
    np.testing.assert_array_equal(x.numpy(), before)


@pytest.mark.parametrize("name", ["ReLU", "SiLU", "Dropout"])
def test_leaf_requiring_grad_refuses(name):
    for layer, lib in ((getattr(nn, name)(inplace=True), ggrad), (getattr(torch.nn, name)(inplace=True), torch)):
        x = lib.tensor(randn(3, 4), requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf Variable"):
            layer(x)


def test_dropout_in_place():
    layer = nn.Dropout(0.5, inplace=True)
    x = ggrad.tensor(randn(40, 50), requires_grad=True)
    y = x * 1
    out = layer(y)
    assert out is y
    kept = y.numpy() != 0
    assert 0.4 < kept.mean() < 0.6
    np.testing.assert_allclose(y.numpy()[kept], 2 * x.numpy()[kept], rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * kept, rtol=1e-6)
    layer.eval()
    z = ggrad.tensor(randn(3, 4))
    assert layer(z) is z
    assert repr(layer) == repr(torch.nn.Dropout(0.5, inplace=True))


def test_layers_without_inplace_refuse_it():
    for name in ("LogSigmoid", "Softsign", "Tanhshrink"):
        with pytest.raises(TypeError):
            getattr(nn, name)(inplace=True)
        with pytest.raises(TypeError):
            getattr(torch.nn, name)(inplace=True)


@pytest.mark.parametrize("method,args", [("relu_", ()), ("sigmoid_", ()), ("tanh_", ()), ("exp_", ()),
                                         ("clamp_", (-0.5, 0.5)), ("pow_", (3,))])
def test_tensor_in_place_methods_on_non_leaves_backpropagate(method, args):
    """The op an in-place method records saves the old value, not the rebound Tensor (before, backward
    raised 'modified by an inplace operation')."""
    check(run(lambda y: getattr(y, method)(*args), ggrad), run(lambda y: getattr(y, method)(*args), torch))


def test_in_place_mul_by_a_tensor_that_requires_grad():
    results = []
    for lib in (ggrad, torch):
        x = lib.tensor(randn_fixed(), requires_grad=True)
        w = lib.tensor(randn_fixed()[::-1].copy(), requires_grad=True)
        y = x + 1.0
        y.mul_(w)   # mul saves y's old value for w's gradient
        (y * y).sum().backward()
        results.append((x.grad.numpy(), w.grad.numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_in_place_write_over_a_saved_result_raises_as_torch():
    for lib in (ggrad, torch):
        x = lib.tensor(randn_fixed(), requires_grad=True)
        y = x.sigmoid()   # saves its result for backward
        y.mul_(2.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()
