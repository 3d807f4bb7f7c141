"""3-D pooling against torch on (C, D, H, W) inputs (ggrad's tensors hold four dims today): values,
indices and input gradients of max_pool3d, avg_pool3d, adaptive_avg_pool3d, adaptive_max_pool3d."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
import ggrad.nn.functional as F
from ggrad.ggml.errors import ShapeError

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(11)


def _both(name, x, *args, **kwargs):
    """Run F.<name> in both with a random weighting of the (first) result backward; return values and grads."""
    ours, theirs = ggrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yo, yt = getattr(F, name)(ours, *args, **kwargs), getattr(TF, name)(theirs, *args, **kwargs)
    vo, vt = (yo[0], yt[0]) if isinstance(yo, tuple) else (yo, yt)
    w = RNG.standard_normal(tuple(vt.shape)).astype(np.float32)
    (vo * ggrad.tensor(w)).sum().backward()
    (vt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(vo.numpy(), vt.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-5)
    return yo, yt


X = RNG.standard_normal((3, 7, 6, 8)).astype(np.float32)

MAX_CASES = [dict(kernel_size=2), dict(kernel_size=(3, 2, 2), stride=(2, 1, 2), padding=(1, 0, 1)),
             dict(kernel_size=3, stride=2, ceil_mode=True), dict(kernel_size=2, dilation=(2, 1, 2)),
             dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)]


@pytest.mark.parametrize("case", MAX_CASES)
def test_max_pool3d_values_indices_and_grad(case):
    (yo, io), (yt, it) = _both("max_pool3d", X, return_indices=True, **case)
    assert io.dtype == ggrad.int64
    np.testing.assert_array_equal(io.numpy(), it.numpy())


AVG_CASES = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
             dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
             dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
             dict(kernel_size=(2, 3, 3), stride=2, ceil_mode=True), dict(kernel_size=2, divisor_override=3)]


@pytest.mark.parametrize("case", AVG_CASES)
def test_avg_pool3d_matches_torch(case):
    _both("avg_pool3d", X, **case)


@pytest.mark.parametrize("size", [1, 3, (2, None, 5), (4, 6, 8), (5, 4, 3)])
def test_adaptive_pools_match_torch(size):
    _both("adaptive_avg_pool3d", X, size)
    (yo, io), (yt, it) = _both("adaptive_max_pool3d", X, size, True)
    np.testing.assert_array_equal(io.numpy(), it.numpy())


def test_ties_go_to_the_first_maximum_as_torch():
    x = np.zeros((2, 4, 4, 4), np.float32)
    x[:, 1:3, 1:3, 1:3] = 1.0
    (yo, io), (yt, it) = _both("max_pool3d", x, 2, return_indices=True)
    np.testing.assert_array_equal(io.numpy(), it.numpy())


def test_layers_match_torch_modules():
    for ours, theirs in ((nn.MaxPool3d(2, 1, 1), torch.nn.MaxPool3d(2, 1, 1)),
                         (nn.AvgPool3d(3, 2, 1, True, False), torch.nn.AvgPool3d(3, 2, 1, True, False)),
                         (nn.AdaptiveAvgPool3d((2, None, 3)), torch.nn.AdaptiveAvgPool3d((2, None, 3))),
                         (nn.AdaptiveMaxPool3d(2), torch.nn.AdaptiveMaxPool3d(2))):
        assert repr(ours) == repr(theirs)
        assert ours.state_dict() == {} and list(theirs.state_dict()) == []
        np.testing.assert_allclose(ours(ggrad.tensor(X)).numpy(), theirs(torch.tensor(X)).numpy(), rtol=1e-5, atol=1e-6)


def test_errors():
    with pytest.raises(ShapeError):
        F.max_pool3d(ggrad.tensor(np.zeros((3, 4, 4), np.float32)), 2)
    with pytest.raises(ShapeError):
        F.avg_pool3d(ggrad.tensor(np.zeros((1, 1, 1, 1), np.float32)), 2)
    with pytest.raises(RuntimeError):
        TF.avg_pool3d(torch.zeros((1, 1, 1, 1)), 2)
    with pytest.raises(ValueError):   # padding over half the kernel: torch raises RuntimeError, ours both
        F.max_pool3d(ggrad.tensor(X), 2, padding=2)
