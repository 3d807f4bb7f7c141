"""Grouped, 'same'-padded and transposed convolutions against PyTorch: values, gradients, module init."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
import ggrad.nn.functional as F

torch = pytest.importorskip("torch")


def randn(*shape, seed=0):
    return np.random.default_rng(seed + len(shape)).standard_normal(shape).astype(np.float32)


def _compare(ours, theirs, arrays, rtol=1e-4, atol=1e-4):
    """Forward values and the gradients of sum(out * r) for every input, ggrad vs torch."""
    g = [ggrad.tensor(a, requires_grad=True) for a in arrays]
    t = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, ref = ours(*g), theirs(*t)
    assert out.shape == tuple(ref.shape)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=rtol, atol=atol)
    r = randn(*ref.shape, seed=7)
    (out * ggrad.tensor(r)).sum().backward()
    (ref * torch.tensor(r)).sum().backward()
    for a, b in zip(g, t):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("kwargs", [dict(groups=2), dict(groups=4, stride=2, padding=1),
                                    dict(groups=2, dilation=2, padding=2), dict(padding="same"),
                                    dict(padding="same", dilation=(1, 2)), dict(padding="valid", groups=4)])
def test_conv2d_groups_and_padding(kwargs):
    x, w, b = randn(2, 4, 7, 6), randn(8, 4 // kwargs.get("groups", 1), 3, 2), randn(8)
    _compare(lambda x, w, b: F.conv2d(x, w, b, **kwargs),
             lambda x, w, b: torch.nn.functional.conv2d(x, w, b, **kwargs), [x, w, b])


@pytest.mark.parametrize("kwargs", [dict(groups=3), dict(groups=3, stride=2, padding=1, dilation=2),
                                    dict(padding="same"), dict(padding="same", dilation=3)])
def test_conv1d_groups_and_padding(kwargs):
    x, w = randn(2, 6, 11), randn(3, 6 // kwargs.get("groups", 1), 4)
    _compare(lambda x, w: F.conv1d(x, w, **kwargs), lambda x, w: torch.nn.functional.conv1d(x, w, **kwargs), [x, w])


@pytest.mark.parametrize("kwargs", [dict(), dict(stride=2), dict(stride=2, padding=1, output_padding=1),
                                    dict(groups=2, stride=(2, 1), dilation=(1, 2)), dict(stride=3, padding=(0, 2))])
def test_conv_transpose2d(kwargs):
    x, w, b = randn(2, 4, 5, 4), randn(4, 6 // kwargs.get("groups", 1), 3, 3), randn(6)
    _compare(lambda x, w, b: F.conv_transpose2d(x, w, b, **kwargs),
             lambda x, w, b: torch.nn.functional.conv_transpose2d(x, w, b, **kwargs), [x, w, b])


@pytest.mark.parametrize("kwargs", [dict(), dict(stride=2, padding=1, output_padding=1), dict(groups=2, dilation=2)])
def test_conv_transpose1d(kwargs):
    x, w = randn(3, 4, 7), randn(4, 3, 5)
    _compare(lambda x, w: F.conv_transpose1d(x, w, **kwargs),
             lambda x, w: torch.nn.functional.conv_transpose1d(x, w, **kwargs), [x, w])


def _copied(ours, cls, *args, **kwargs):
    ref = cls(*args, **kwargs)
    ref.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    return ref


@pytest.mark.parametrize("ours, theirs, args, kwargs, shape", [
    (nn.Conv2d, torch.nn.Conv2d, (4, 6, 3), dict(groups=2, padding="same"), (2, 4, 6, 5)),
    (nn.Conv1d, torch.nn.Conv1d, (6, 6, 4), dict(groups=6, padding="same"), (2, 6, 9)),
    (nn.ConvTranspose2d, torch.nn.ConvTranspose2d, (4, 6, 3), dict(stride=2, padding=1, output_padding=1),
     (2, 4, 5, 5)),
    (nn.ConvTranspose1d, torch.nn.ConvTranspose1d, (4, 2, 3), dict(groups=2, stride=2), (4, 6)),
])
def test_modules_match_torch(ours, theirs, args, kwargs, shape):
    layer = ours(*args, **kwargs)
    ref = _copied(layer, theirs, *args, **kwargs)
    assert layer.weight.shape == tuple(ref.weight.shape)
    x = randn(*shape)
    np.testing.assert_allclose(layer(ggrad.tensor(x)).numpy(), ref(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-4)


def test_module_init_bounds_follow_torch_fan_in():
    """kaiming_uniform(a=sqrt(5)) and the bias bound use fan_in = weight.shape[1] * prod(kernel)."""
    for layer, fan_in in ((nn.Conv2d(8, 4, 3, groups=4), 2 * 9), (nn.ConvTranspose2d(8, 6, 2, groups=2), 3 * 4)):
        bound = 1 / np.sqrt(fan_in)
        assert np.abs(layer.weight.numpy()).max() <= bound + 1e-6
        assert np.abs(layer.bias.numpy()).max() <= bound + 1e-6
        assert np.abs(layer.weight.numpy()).max() > 0.5 * bound


def test_conv_transpose_output_size():
    layer = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    ref = _copied(layer, torch.nn.ConvTranspose2d, 2, 3, 3, stride=2, padding=1)
    x = randn(1, 2, 4, 4)
    out = layer(ggrad.tensor(x), output_size=(8, 8))
    np.testing.assert_allclose(out.numpy(), ref(torch.tensor(x), output_size=(8, 8)).detach().numpy(),
                               rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="valid sizes range from 7 to 8"):
        layer(ggrad.tensor(x), output_size=(10, 10))


def test_bad_groups_and_shapes():
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(4, 6, 3, groups=4)
    with pytest.raises(ValueError, match="groups=3 must divide"):
        F.conv2d(ggrad.randn(1, 4, 5, 5), ggrad.randn(6, 2, 3, 3), groups=3)
    with pytest.raises(ggrad.ShapeError, match="expects 4 input channels, got 6"):
        F.conv2d(ggrad.randn(1, 6, 5, 5), ggrad.randn(6, 2, 3, 3), groups=2)
    with pytest.raises(ValueError, match="output_padding"):
        F.conv_transpose2d(ggrad.randn(1, 2, 4, 4), ggrad.randn(2, 3, 3, 3), stride=2, output_padding=2)
    with pytest.raises(ggrad.ShapeError, match="conv_transpose1d: weight"):
        F.conv_transpose1d(ggrad.randn(1, 3, 4), ggrad.randn(2, 3, 3))
