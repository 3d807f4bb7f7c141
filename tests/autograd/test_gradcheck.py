"""The public gradcheck: it passes correct gradients and catches wrong ones, as torch.autograd.gradcheck."""

import numpy as np
import pytest

import ggrad
from ggrad import nn
from ggrad.autograd import Function, GradcheckError, gradcheck


class WrongSquare(Function):
    """x**2 with a gradient off by a factor of 3."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x * 6.0


def _x(seed=0, shape=(3, 4)):
    return ggrad.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32), requires_grad=True)


def test_passes_on_own_finite_differences():
    assert gradcheck(lambda a, b: ggrad.tanh(a) * b + a @ b.T @ a, (_x(0), _x(1)))


def test_passes_against_a_reference():
    assert gradcheck(lambda a: ggrad.exp(a).sum(-1), _x(), reference=lambda a: np.exp(a).sum(-1))


def test_wrong_backward_raises_naming_the_input():
    with pytest.raises(GradcheckError, match="gradient of input 0"):
        gradcheck(WrongSquare.apply, _x())
    with pytest.raises(RuntimeError):   # GradcheckError is a RuntimeError, as in PyTorch
        gradcheck(WrongSquare.apply, _x(), reference=lambda a: a * a)


def test_raise_exception_false_returns_false():
    assert gradcheck(WrongSquare.apply, _x(), raise_exception=False) is False


def test_wrong_forward_against_reference_raises():
    with pytest.raises(GradcheckError, match="output 0 differs"):
        gradcheck(lambda a: a * 2.0, _x(), reference=lambda a: a * 3.0)


def test_checks_module_parameters():
    ggrad.manual_seed(0)
    layer = nn.Linear(4, 2)
    x = ggrad.tensor(np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32))
    w0 = layer.weight.numpy().copy()
    assert gradcheck(layer, (x,), params=list(layer.parameters()))
    np.testing.assert_array_equal(layer.weight.numpy(), w0)   # the perturbations were undone


def test_needs_something_to_check():
    with pytest.raises(ValueError, match="requires grad"):
        gradcheck(lambda a: a * 2.0, ggrad.ones(3))
