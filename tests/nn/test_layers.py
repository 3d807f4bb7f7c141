"""Layers against numpy references (values and float64 finite-difference gradients): Linear, Embedding,
LayerNorm, RMSNorm, Dropout, activations, Softmax, Flatten, Identity; and their input checks."""

import math

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
import ggrad.nn.functional as F
from gradcheck_util import check

RNG = np.random.default_rng(0)
_erf = np.vectorize(math.erf)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# ---- Linear ------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4), (4,)])
def test_linear(shape):
    layer = nn.Linear(4, 3)
    check(layer, lambda x, w, b: x @ w.T + b, [randn(*shape)], [layer.weight, layer.bias])


def test_linear_without_bias():
    layer = nn.Linear(4, 2, bias=False)
    assert layer.bias is None and len(list(layer.parameters())) == 1
    check(layer, lambda x, w: x @ w.T, [randn(3, 4)], [layer.weight])
    assert repr(layer) == "Linear(in_features=4, out_features=2, bias=False)"


def test_linear_rejects_wrong_in_features():
    layer = nn.Linear(4, 3)
    with pytest.raises(ggrad.ShapeError, match=r"Linear\(in_features=4, out_features=3\): expected input with "
                                               r"last dimension 4, got shape \(2, 5\)"):
        layer(ggrad.randn(2, 5))
    with pytest.raises(ValueError, match="in_features must be a positive integer"):
        nn.Linear(0, 3)


# ---- Embedding ---------------------------------------------------------------------------------
def test_embedding():
    layer = nn.Embedding(10, 4)
    index = np.array([[1, 3, 3], [0, 9, 2]])
    out = check(layer, lambda i, w: w[i], [index], [layer.weight])
    assert out.shape == (2, 3, 4)
    assert repr(layer) == "Embedding(10, 4)"


def test_embedding_padding_idx_row_is_zero_and_gets_no_gradient():
    layer = nn.Embedding(6, 3, padding_idx=2)
    w = layer.weight.numpy()
    assert not w[2].any() and w[[0, 1, 3]].any()
    index = np.array([2, 0, 2, 5, 0])
    g = randn(5, 3)
    out = layer(ggrad.tensor(index))
    np.testing.assert_array_equal(out.numpy(), w[index])
    (out * ggrad.tensor(g)).sum().backward()
    expected = np.zeros_like(w)
    np.add.at(expected, index, g)
    expected[2] = 0.0
    np.testing.assert_allclose(layer.weight.grad.numpy(), expected, rtol=1e-6, atol=1e-6)
    assert nn.Embedding(6, 3, padding_idx=-1).padding_idx == 5
    assert "padding_idx=2" in repr(layer)


def test_embedding_bad_indices():
    layer = nn.Embedding(5, 2)
    with pytest.raises(TypeError, match="integer tensor"):
        layer(ggrad.zeros(3))
    with pytest.raises(IndexError, match=r"indices span \[0, 7\] but the table has 5 rows"):
        layer([0, 7])
    with pytest.raises(ValueError, match="padding_idx 5 must be within"):
        nn.Embedding(5, 2, padding_idx=5)


def test_embedding_from_pretrained():
    table = randn(4, 3)
    layer = nn.Embedding.from_pretrained(ggrad.tensor(table))
    assert not layer.weight.requires_grad
    np.testing.assert_array_equal(layer(ggrad.tensor([3, 1])).numpy(), table[[3, 1]])


# ---- normalisation -----------------------------------------------------------------------------
def np_layer_norm(x, w, b, eps=1e-5, dims=1):
    axes = tuple(range(-dims, 0))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def test_layer_norm():
    layer = nn.LayerNorm(5)
    with ggrad.no_grad():  # non-trivial affine parameters
        layer.weight.copy_(ggrad.tensor(randn(5)))
        layer.bias.copy_(ggrad.tensor(randn(5)))
    check(layer, np_layer_norm, [randn(2, 3, 5)], [layer.weight, layer.bias])
    assert repr(layer) == "LayerNorm((5,), eps=1e-05, elementwise_affine=True)"


def test_layer_norm_over_two_dims_and_without_affine():
    layer = nn.LayerNorm((3, 4), eps=1e-3)
    check(layer, lambda x, w, b: np_layer_norm(x, w, b, 1e-3, 2), [randn(2, 3, 4)], [layer.weight, layer.bias])
    bare = nn.LayerNorm(4, elementwise_affine=False)
    assert list(bare.parameters()) == []
    check(bare, lambda x: np_layer_norm(x, 1.0, 0.0), [randn(3, 4)])


def test_rms_norm():
    layer = nn.RMSNorm(6, eps=1e-5)
    with ggrad.no_grad():
        layer.weight.copy_(ggrad.tensor(randn(6)))

    def ref(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w

    check(layer, ref, [randn(4, 6)], [layer.weight])
    default = nn.RMSNorm(6)  # eps=None: float32's epsilon, as PyTorch
    x = randn(2, 6)
    np.testing.assert_allclose(default(ggrad.tensor(x)).numpy(),
                               x / np.sqrt((x * x).mean(-1, keepdims=True) + np.finfo(np.float32).eps), rtol=1e-5)


def test_rms_norm_weight_gradient_after_reading_the_output():
    layer = nn.RMSNorm(6, eps=1e-5)
    x = randn(4, 6)
    y = layer(ggrad.tensor(x))
    y.numpy()  # e.g. printing the loss before backward
    y.sum().backward()
    xhat = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(layer.weight.grad.numpy(), xhat.sum(0), rtol=1e-4, atol=1e-4)


def test_norm_layers_reject_wrong_trailing_shape():
    with pytest.raises(ggrad.ShapeError, match=r"LayerNorm\(\(5,\)\): expected input whose last dimensions"):
        nn.LayerNorm(5)(ggrad.randn(2, 4))
    with pytest.raises(ggrad.ShapeError, match="RMSNorm"):
        nn.RMSNorm(3)(ggrad.randn(3, 2))


# ---- dropout -----------------------------------------------------------------------------------
def test_dropout_training_and_eval():
    layer = nn.Dropout(0.25)
    x = ggrad.tensor(np.full((200, 50), 2.0, np.float32), requires_grad=True)
    y = layer(x)
    v = y.numpy()
    kept = v != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(v[kept], 2.0 / 0.75, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), kept / 0.75, rtol=1e-6)  # the same mask, scaled
    layer.eval()
    assert layer(x) is x
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


def test_dropout_is_reproducible_under_manual_seed():
    layer = nn.Dropout(0.5)
    x = ggrad.ones(64)
    ggrad.manual_seed(5)
    a = layer(x).numpy()
    ggrad.manual_seed(5)
    b = layer(x).numpy()
    np.testing.assert_array_equal(a, b)


# ---- activations -------------------------------------------------------------------------------
def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


ACTIVATIONS = [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.GELU(), lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    (nn.GELU("tanh"), _gelu_tanh),
    (nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
    (nn.Tanh(), np.tanh),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (nn.LeakyReLU(0.1), lambda x: np.where(x >= 0, x, 0.1 * x)),
    (nn.ELU(0.5), lambda x: np.where(x > 0, x, 0.5 * (np.exp(x) - 1))),
    (nn.Softplus(), lambda x: np.log1p(np.exp(x))),
    (nn.Softmax(dim=-1), np_softmax),
    (nn.Softmax(dim=0), lambda x: np_softmax(x, 0)),
    (nn.LogSoftmax(dim=1), lambda x: np.log(np_softmax(x, 1))),
    (nn.Identity(3, foo=1), lambda x: x),
]


@pytest.mark.parametrize("layer, ref", ACTIVATIONS, ids=[type(a).__name__ + repr(a) for a, _ in ACTIVATIONS])
def test_activation(layer, ref):
    # GGML's CPU gelu (tanh form) reads an f16 table: about 3 significant digits.
    tol = 1e-3 if getattr(layer, "approximate", None) == "tanh" else 2e-4
    check(layer, ref, [randn(3, 5)], atol=tol, rtol=tol, grad_atol=2e-3)


def test_activation_reprs():
    assert repr(nn.GELU("tanh")) == "GELU(approximate='tanh')"
    assert repr(nn.Softmax(1)) == "Softmax(dim=1)"
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"   # as PyTorch
    with pytest.raises(ValueError, match="approximate"):
        nn.GELU("fast")


def test_flatten():
    check(nn.Flatten(), lambda x: x.reshape(2, -1), [randn(2, 3, 4)])
    check(nn.Flatten(0, 1), lambda x: x.reshape(6, 4), [randn(2, 3, 4)])
    assert repr(nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"


# ---- functional --------------------------------------------------------------------------------
def test_functional_reexports_and_embedding_padding():
    for name in ("linear", "relu", "gelu", "silu", "softmax", "log_softmax", "layer_norm", "rms_norm", "dropout",
                 "embedding", "conv1d", "conv2d", "max_pool2d", "avg_pool2d", "scaled_dot_product_attention",
                 "cross_entropy", "mse_loss", "nll_loss", "l1_loss", "huber_loss", "smooth_l1_loss",
                 "binary_cross_entropy", "binary_cross_entropy_with_logits"):
        assert callable(getattr(F, name)), name
    w = ggrad.tensor(randn(4, 2), requires_grad=True)
    F.embedding(ggrad.tensor([1, 1, 3]), w, padding_idx=1).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[0, 0], [0, 0], [0, 0], [1, 1]])
