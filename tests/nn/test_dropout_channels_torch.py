"""Channel-wise and alpha dropout against torch: channel structure, scaling, eval identity, gradients
(x * mask, checked against torch applying our mask) and the statistics; not torch's random stream."""

import warnings

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
import ggrad.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(5)
SHAPES = {"dropout1d": (6, 40, 5), "dropout2d": (6, 40, 3, 4), "dropout3d": (40, 2, 3, 4)}


def _randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_channel_masks_are_constant_per_channel_and_scaled(name):
    ggrad.manual_seed(1)
    p = 0.3
    x = _randn(*SHAPES[name]) + 5.0   # away from 0, so x / y reads the mask
    y = getattr(F, name)(ggrad.tensor(x), p, True).numpy()
    ratio = y / x
    lead = 1 if name == "dropout3d" else 2   # dropout3d's (C, D, H, W) has no batch dim
    per_channel = ratio.reshape(int(np.prod(x.shape[:lead])), -1)
    assert np.allclose(per_channel, per_channel[:, :1], atol=1e-6)          # one decision per channel
    assert np.allclose(np.unique(np.round(per_channel[:, 0], 5)), [0.0, round(1 / (1 - p), 5)])
    kept = (per_channel[:, 0] > 0).mean()
    assert abs(kept - (1 - p)) < 0.15


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_gradient_is_the_mask_as_torch_computes_it(name):
    ggrad.manual_seed(2)
    x = _randn(*SHAPES[name]) + 5.0
    ours = ggrad.tensor(x, requires_grad=True)
    y = getattr(F, name)(ours, 0.5, True)
    w = _randn(*x.shape)
    (y * ggrad.tensor(w)).sum().backward()
    mask = torch.tensor(np.round(y.numpy() / x, 4))   # our draw, replayed in torch
    theirs = torch.tensor(x, requires_grad=True)
    (theirs * mask * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-3)


@pytest.mark.parametrize("module", ["Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"])
def test_module_eval_is_identity_and_matches_torch_surface(module):
    ours, theirs = getattr(nn, module)(), getattr(torch.nn, module)()
    assert repr(ours) == repr(theirs)
    assert ours.p == theirs.p == 0.5 and ours.inplace is theirs.inplace is False
    assert list(ours.state_dict()) == list(theirs.state_dict()) == []
    x = _randn(3, 4, 5, 2) if module in ("Dropout2d", "Dropout3d") else _randn(3, 4, 5)
    ours.eval()
    np.testing.assert_array_equal(ours(ggrad.tensor(x)).numpy(), x)
    with pytest.raises(ValueError):
        getattr(nn, module)(1.5)
    with pytest.raises(ValueError):
        getattr(torch.nn, module)(1.5)


def test_alpha_dropout_values_match_torch_on_zeros():
    """On x = 0 the output is the shift alone: its two values (kept, dropped) are torch's."""
    ggrad.manual_seed(3)
    for p in (0.2, 0.5):
        ours = np.unique(np.round(F.alpha_dropout(ggrad.zeros(2000), p, True).numpy(), 5))
        theirs = np.unique(np.round(TF.alpha_dropout(torch.zeros(2000), p, True).numpy(), 5))
        np.testing.assert_allclose(ours, theirs, atol=1e-5)


@pytest.mark.parametrize("fn", ["alpha_dropout", "feature_alpha_dropout"])
def test_alpha_dropout_keeps_mean_and_variance_as_torch(fn):
    ggrad.manual_seed(4)
    x = _randn(200, 50, 20)
    ours = getattr(F, fn)(ggrad.tensor(x), 0.2, True).numpy()
    theirs = getattr(TF, fn)(torch.tensor(x), 0.2, True).numpy()
    assert abs(ours.mean() - theirs.mean()) < 0.05 and abs(ours.var() - theirs.var()) < 0.1
    assert abs(ours.mean()) < 0.05 and abs(ours.var() - 1.0) < 0.1


def test_feature_alpha_dropout_structure_and_gradient():
    ggrad.manual_seed(5)
    p = 0.4
    x = _randn(8, 30, 6)
    ours = ggrad.tensor(x, requires_grad=True)
    y = F.feature_alpha_dropout(ours, p, True)
    y.sum().backward()
    a = 1.0 / np.sqrt((1.7580993408473766 ** 2 * p + 1) * (1 - p))
    g = ours.grad.numpy()
    assert np.allclose(g, g[:, :, :1])                                       # one decision per channel
    assert np.all(np.isclose(g, 0.0) | np.isclose(g, a, rtol=1e-5))
    dropped = g[:, :, 0] == 0
    dropped_value = -1.7580993408473766 * a + 1.7580993408473766 * a * p
    np.testing.assert_allclose(y.numpy()[dropped], dropped_value, rtol=1e-5)


def test_defaults_and_training_flag_as_torch():
    x = _randn(4, 5, 3)
    # the F. forms of alpha dropout default to training=False, the channel forms to True (as torch)
    np.testing.assert_array_equal(F.alpha_dropout(ggrad.tensor(x)).numpy(), x)
    np.testing.assert_array_equal(F.feature_alpha_dropout(ggrad.tensor(x)).numpy(), x)
    ggrad.manual_seed(7)
    assert (F.dropout1d(ggrad.tensor(x + 5.0)).numpy() == 0).any()   # training=True by default
    np.testing.assert_array_equal(F.dropout2d(ggrad.tensor(_randn(2, 3, 4, 4)), 0.0).numpy().shape, (2, 3, 4, 4))
    np.testing.assert_array_equal(F.dropout1d(ggrad.tensor(x), 1.0).numpy(), np.zeros_like(x))


def test_errors_and_warnings_as_torch():
    x1 = _randn(5)
    for lib, t in ((F, ggrad.tensor(x1)), (TF, torch.tensor(x1))):
        with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
            lib.dropout1d(t)
        with pytest.raises(ValueError, match="between 0 and 1"):
            lib.dropout2d(t, -0.1)
        with pytest.warns(UserWarning, match="dropout2d: Received a 3D input"):
            lib.dropout2d(t.reshape(1, 1, 5) if lib is TF else t.reshape(1, 1, 5))
        with pytest.raises(RuntimeError, match="Feature dropout requires at least 2 dimensions"):
            lib.feature_alpha_dropout(t, 0.5, True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.dropout2d(ggrad.tensor(_randn(2, 3, 4, 4)))   # 4-D: no warning


def test_inplace_writes_the_input():
    ggrad.manual_seed(6)
    x = ggrad.tensor(_randn(3, 8, 4) + 5.0)
    y = F.dropout1d(x, 0.5, True, inplace=True)
    assert y is x
    assert (x.numpy() == 0).any()
