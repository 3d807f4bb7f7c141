"""Conv1d, Conv2d, MaxPool2d, AvgPool2d against numpy references (values, finite-difference gradients)
and against PyTorch when it is installed; input checks."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
from gradcheck_util import check

RNG = np.random.default_rng(1)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def np_conv2d(x, w, b=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    (s0, s1), (p0, p1), (d0, d1) = stride, padding, dilation
    x = np.pad(x, ((0, 0), (0, 0), (p0, p0), (p1, p1)))
    kh, kw = w.shape[2:]
    oh = (x.shape[2] - d0 * (kh - 1) - 1) // s0 + 1
    ow = (x.shape[3] - d1 * (kw - 1) - 1) // s1 + 1
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for u in range(kh):
        for v in range(kw):
            patch = x[:, :, u * d0:u * d0 + s0 * (oh - 1) + 1:s0, v * d1:v * d1 + s1 * (ow - 1) + 1:s1]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, u, v])
    return out if b is None else out + b[None, :, None, None]


def np_conv1d(x, w, b=None, stride=1, padding=0, dilation=1):
    out = np_conv2d(x[:, :, None, :], w[:, :, None, :], b, (1, stride), (0, padding), (1, dilation))
    return out[:, :, 0, :]


def np_pool2d(x, kernel, stride, padding, op):
    (k0, k1), (s0, s1), (p0, p1) = ((v, v) if isinstance(v, int) else v for v in (kernel, stride, padding))
    fill = -np.inf if op == "max" else 0.0
    x = np.pad(x, ((0, 0), (0, 0), (p0, p0), (p1, p1)), constant_values=fill)
    oh = (x.shape[2] - k0) // s0 + 1
    ow = (x.shape[3] - k1) // s1 + 1
    windows = np.stack([x[:, :, u:u + s0 * (oh - 1) + 1:s0, v:v + s1 * (ow - 1) + 1:s1]
                        for u in range(k0) for v in range(k1)])
    return windows.max(0) if op == "max" else windows.mean(0)


# ---- convolution -------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [{}, {"stride": 2, "padding": 1}, {"padding": (1, 2), "dilation": (2, 1)},
                                    {"bias": False, "padding": "same"}])
def test_conv2d(kwargs):
    layer = nn.Conv2d(3, 4, 3, **kwargs)
    params = [layer.weight] + ([layer.bias] if layer.bias is not None else [])

    def ref(x, w, b=None):
        return np_conv2d(x, w, b, layer.stride, layer.padding, layer.dilation)

    out = check(layer, ref, [randn(2, 3, 6, 5)], params, atol=1e-4, grad_atol=2e-3)
    assert out.shape[:2] == (2, 4)


def test_conv2d_rectangular_kernel_and_unbatched_input():
    layer = nn.Conv2d(2, 3, (2, 3), stride=(1, 2))
    check(layer, lambda x, w, b: np_conv2d(x[None], w, b, (1, 2))[0], [randn(2, 5, 7)], [layer.weight, layer.bias])


@pytest.mark.parametrize("kwargs", [{}, {"stride": 2, "padding": 2, "dilation": 2}])
def test_conv1d(kwargs):
    layer = nn.Conv1d(3, 5, 3, **kwargs)

    def ref(x, w, b):
        return np_conv1d(x, w, b, layer.stride[0], layer.padding[0], layer.dilation[0])

    check(layer, ref, [randn(2, 3, 9)], [layer.weight, layer.bias], grad_atol=2e-3)


def test_conv_matches_torch():
    torch = pytest.importorskip("torch")
    layer = nn.Conv2d(3, 6, (3, 2), stride=(2, 1), padding=(1, 1), dilation=(1, 2))
    ref = torch.nn.Conv2d(3, 6, (3, 2), stride=(2, 1), padding=(1, 1), dilation=(1, 2))
    ref.load_state_dict({k: torch.tensor(v.numpy()) for k, v in layer.state_dict().items()})
    x = randn(2, 3, 8, 7)
    np.testing.assert_allclose(layer(ggrad.tensor(x)).numpy(), ref(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)
    layer1 = nn.Conv1d(4, 2, 5, padding=2)
    ref1 = torch.nn.Conv1d(4, 2, 5, padding=2)
    ref1.load_state_dict({k: torch.tensor(v.numpy()) for k, v in layer1.state_dict().items()})
    x = randn(3, 4, 10)
    np.testing.assert_allclose(layer1(ggrad.tensor(x)).numpy(), ref1(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)


def test_conv_input_checks():
    layer = nn.Conv2d(3, 8, 3)
    with pytest.raises(ggrad.ShapeError, match=r"Conv2d\(3, 8, kernel_size=\(3, 3\)\): expected input with 3 "
                                               r"channels, got 4 channels"):
        layer(ggrad.randn(1, 4, 5, 5))
    with pytest.raises(ggrad.ShapeError, match="expected 3-D \\(unbatched\\) or 4-D input"):
        layer(ggrad.randn(5, 5))
    with pytest.raises(ggrad.ShapeError, match="smaller than the kernel"):
        layer(ggrad.randn(1, 3, 2, 5))
    with pytest.raises(ggrad.ShapeError, match=r"Conv1d\(2, 2, kernel_size=\(3,\)\): expected input with 2"):
        nn.Conv1d(2, 2, 3)(ggrad.randn(1, 3, 8))
    with pytest.raises(ValueError, match="kernel_size must be an int or a tuple of 2 ints"):
        nn.Conv2d(1, 1, (1, 2, 3))
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        nn.Conv2d(1, 1, 3, stride=2, padding="same")


def test_conv_repr():
    assert repr(nn.Conv2d(3, 8, 3, stride=2, padding=1)) == \
        "Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))"
    assert repr(nn.Conv1d(3, 8, 5, bias=False)) == "Conv1d(3, 8, kernel_size=(5,), stride=(1,), bias=False)"


# ---- pooling -----------------------------------------------------------------------------------
@pytest.mark.parametrize("cls, op", [(nn.MaxPool2d, "max"), (nn.AvgPool2d, "avg")])
@pytest.mark.parametrize("kwargs", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1},
                                    {"kernel_size": (2, 3), "stride": (1, 2)}])
def test_pool2d(cls, op, kwargs):
    layer = cls(**kwargs)

    def ref(x):
        return np_pool2d(x, layer.kernel_size, layer.stride, layer.padding, op)

    check(layer, ref, [randn(2, 3, 6, 7)], grad_atol=2e-3)


def test_pool_matches_torch():
    torch = pytest.importorskip("torch")
    x = randn(2, 3, 7, 6)
    for ours, theirs in ((nn.MaxPool2d(3, 2, 1), torch.nn.MaxPool2d(3, 2, 1)),
                         (nn.AvgPool2d(3, 2, 1), torch.nn.AvgPool2d(3, 2, 1)),
                         (nn.MaxPool2d((2, 3)), torch.nn.MaxPool2d((2, 3)))):
        np.testing.assert_allclose(ours(ggrad.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(), rtol=1e-6,
                                   atol=1e-6, err_msg=repr(ours))


def test_pool_checks_and_repr():
    with pytest.raises(ValueError, match="padding should be at most half of kernel size"):
        nn.MaxPool2d(2, padding=2)
    with pytest.raises(ggrad.ShapeError, match="expected 3-D \\(C, H, W\\) or 4-D"):
        nn.AvgPool2d(2)(ggrad.randn(4, 4))
    with pytest.raises(ggrad.ShapeError, match="smaller than the kernel"):
        nn.MaxPool2d(5)(ggrad.randn(1, 1, 3, 8))
    assert nn.MaxPool2d(2)(ggrad.randn(3, 4, 4)).shape == (3, 2, 2)
    assert repr(nn.MaxPool2d(2)) == "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
