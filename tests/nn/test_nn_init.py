"""ggrad.nn.init: bounds and moments of each scheme, fans, reproducibility under manual_seed."""

import math

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
from ggrad.nn import Parameter, init


def _param(*shape):
    return Parameter(ggrad.zeros(*shape))


def test_uniform_normal_constant():
    p = _param(200, 50)
    assert init.uniform_(p, -0.5, 2.0) is p
    v = p.numpy()
    assert v.min() >= -0.5 and v.max() <= 2.0 and abs(v.mean() - 0.75) < 0.03
    init.normal_(p, 1.0, 0.5)
    v = p.numpy()
    assert abs(v.mean() - 1.0) < 0.02 and abs(v.std() - 0.5) < 0.02
    init.constant_(p, 3.5)
    assert (p.numpy() == 3.5).all()
    init.zeros_(p)
    assert not p.numpy().any()
    init.ones_(p)
    assert (p.numpy() == 1).all()
    init.trunc_normal_(p, std=1.0, a=-1.0, b=1.0)
    assert np.abs(p.numpy()).max() <= 1.0
    q = _param(3, 3)
    np.testing.assert_array_equal(init.eye_(q).numpy(), np.eye(3))


def test_init_keeps_the_parameter_and_records_no_graph():
    p = _param(4, 4)
    init.normal_(p)
    assert isinstance(p, Parameter) and p.requires_grad and p.grad_fn is None and p.is_leaf


def test_fans_and_gains():
    assert init._calculate_fan_in_and_fan_out(_param(8, 3, 5, 5)) == (75, 200)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(_param(5))
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(2 / 6))
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="fan_in, fan_out"):
        init.kaiming_uniform_(_param(3, 3), mode="fan")


@pytest.mark.parametrize("scheme, bound_or_std", [
    ("xavier_uniform_", math.sqrt(6 / (300 + 100))),
    ("xavier_normal_", math.sqrt(2 / (300 + 100))),
    ("kaiming_uniform_", math.sqrt(2) * math.sqrt(3 / 100)),
    ("kaiming_normal_", math.sqrt(2) / math.sqrt(100)),
])
def test_glorot_and_he_scales(scheme, bound_or_std):
    p = _param(300, 100)
    kwargs = {"nonlinearity": "relu"} if scheme.startswith("kaiming") else {}
    v = getattr(init, scheme)(p, **kwargs).numpy()
    if scheme.endswith("uniform_"):
        assert np.abs(v).max() <= bound_or_std and np.abs(v).max() > 0.98 * bound_or_std
    else:
        assert abs(v.std() - bound_or_std) < 0.03 * bound_or_std


def test_layer_defaults_match_pytorch_schemes():
    lin = nn.Linear(64, 500)
    bound = 1 / math.sqrt(64)
    w = lin.weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.98 * bound
    assert np.abs(lin.bias.numpy()).max() <= bound
    conv = nn.Conv2d(4, 300, 3)
    bound = 1 / math.sqrt(4 * 9)
    assert np.abs(conv.weight.numpy()).max() <= bound and np.abs(conv.bias.numpy()).max() <= bound
    emb = nn.Embedding(1000, 16)
    assert abs(emb.weight.numpy().std() - 1.0) < 0.03
    ln = nn.LayerNorm(6)
    assert (ln.weight.numpy() == 1).all() and not ln.bias.numpy().any()
    mha = nn.MultiHeadAttention(16, 4, batch_first=True)
    assert not mha.in_proj_bias.numpy().any() and not mha.out_proj.bias.numpy().any()
    assert np.abs(mha.in_proj_weight.numpy()).max() <= math.sqrt(6 / (16 + 48))


def test_manual_seed_makes_initialisation_reproducible():
    def build():
        return nn.TransformerBlock(8, 2).state_dict()

    ggrad.manual_seed(123)
    first = build()
    ggrad.manual_seed(123)
    second = build()
    ggrad.manual_seed(7)
    third = build()
    for key in first:
        np.testing.assert_array_equal(first[key].numpy(), second[key].numpy())
    assert any(not np.array_equal(first[k].numpy(), third[k].numpy()) for k in first)
