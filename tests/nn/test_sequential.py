"""nn.Sequential: PyTorch's container (the Keras-style model: tests/train/test_keras_sequential.py)."""

from collections import OrderedDict

import numpy as np
import pytest

import ggrad
from ggrad import nn


# ---- the container ----------------------------------------------------------------------------------
def test_container_api():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    model = nn.Sequential(a, b, c)
    assert len(model) == 3 and list(model) == [a, b, c]
    assert model[0] is a and model[-1] is c
    assert isinstance(model[1:], nn.Sequential) and list(model[1:]) == [b, c]
    assert [n for n, _ in model.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    x = ggrad.randn(4, 2)
    np.testing.assert_allclose(model(x).numpy(), c(b(a(x))).numpy(), rtol=1e-6)
    d = nn.Tanh()
    model.append(d)
    assert model[3] is d
    del model[1]
    assert list(model) == [a, c, d] and list(model._modules) == ["0", "1", "2"]
    model.insert(1, b)
    assert list(model) == [a, b, c, d]
    assert model.pop() is d and len(model) == 3
    model[1] = nn.GELU()
    assert isinstance(model[1], nn.GELU)
    both = model + nn.Sequential(nn.Sigmoid())
    assert len(both) == 4 and isinstance(both[-1], nn.Sigmoid)
    with pytest.raises(IndexError):
        model[5]
    with pytest.raises(TypeError):
        nn.Sequential(3)


def test_ordered_dict_constructor_and_repr():
    model = nn.Sequential(OrderedDict([("hidden", nn.Linear(2, 4)), ("act", nn.ReLU()), ("out", nn.Linear(4, 1))]))
    assert model.hidden is model[0] and model.out is model[2]
    assert [n for n, _ in model.named_parameters()][0] == "hidden.weight"
    assert "(hidden): Linear(in_features=2, out_features=4, bias=True)" in repr(model)


def test_keras_methods_say_where_they_are():
    with pytest.raises(AttributeError, match="ggrad.Sequential"):
        nn.Sequential(nn.Linear(2, 2)).compile(loss="mse")
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'$"):
        nn.Sequential().nonexistent
