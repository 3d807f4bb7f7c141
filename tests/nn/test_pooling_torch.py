"""Max and average pooling, 1-D and 2-D, against PyTorch: dilation, ceil_mode, return_indices,
count_include_pad and divisor_override; values, input gradients (ties included: the first maximum in
row-major order takes the gradient), unbatched input, reprs, and the errors."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
import ggrad.nn.functional as F

torch = pytest.importorskip("torch")
from torch_parity_util import compare, leaf, randn  # noqa: E402  (needs torch)

MAX = [dict(kernel_size=3), dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=3, dilation=2),
       dict(kernel_size=2, stride=2, padding=1, dilation=2, ceil_mode=True), dict(kernel_size=3, stride=2, ceil_mode=True),
       dict(kernel_size=(2, 3), stride=(1, 2), dilation=(2, 1), padding=(1, 1))]
AVG = [dict(kernel_size=3), dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
       dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), dict(kernel_size=2, stride=3, ceil_mode=True, count_include_pad=False),
       dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 0), ceil_mode=True)]
AVG2D_ONLY = [dict(kernel_size=2, divisor_override=3), dict(kernel_size=3, padding=1, stride=2, ceil_mode=True, divisor_override=5)]


def pair(name, kwargs):
    return getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)


def one_d(kwargs):
    """The 1-D form of a 2-D setting (the width's entries)."""
    return {k: v[1] if isinstance(v, tuple) else v for k, v in kwargs.items()}


@pytest.mark.parametrize("kwargs", MAX, ids=[str(i) for i in range(len(MAX))])
@pytest.mark.parametrize("dims", [1, 2])
def test_max_pool(kwargs, dims):
    name = f"MaxPool{dims}d"
    ours, theirs = pair(name, kwargs if dims == 2 else one_d(kwargs))
    x, tx = leaf(randn(2, 3, 7, 9) if dims == 2 else randn(2, 3, 9))
    compare(ours, theirs, [x], [tx])


@pytest.mark.parametrize("kwargs", AVG, ids=[str(i) for i in range(len(AVG))])
@pytest.mark.parametrize("dims", [1, 2])
def test_avg_pool(kwargs, dims):
    ours, theirs = pair(f"AvgPool{dims}d", kwargs if dims == 2 else one_d(kwargs))
    x, tx = leaf(randn(2, 3, 7, 9) if dims == 2 else randn(2, 3, 9))
    compare(ours, theirs, [x], [tx])


@pytest.mark.parametrize("kwargs", AVG2D_ONLY, ids=["override", "override_ceil_padded"])
def test_avg_pool2d_divisor_override(kwargs):
    ours, theirs = pair("AvgPool2d", kwargs)
    x, tx = leaf(randn(2, 3, 7, 8))
    compare(ours, theirs, [x], [tx])


@pytest.mark.parametrize("kwargs", MAX[:1] + MAX[2:5], ids=["plain", "dilated", "dilated_ceil", "ceil"])
@pytest.mark.parametrize("dims", [1, 2])
def test_return_indices(kwargs, dims):
    kwargs = kwargs if dims == 2 else one_d(kwargs)
    x = randn(2, 3, 7, 9) if dims == 2 else randn(2, 3, 9)
    pool = getattr(F, f"max_pool{dims}d")
    values, indices = pool(ggrad.tensor(x), **kwargs, return_indices=True)
    tvalues, tindices = getattr(torch.nn.functional, f"max_pool{dims}d")(torch.tensor(x), **kwargs,
                                                                         return_indices=True)
    np.testing.assert_array_equal(values.numpy(), tvalues.numpy())
    np.testing.assert_array_equal(indices.numpy(), tindices.numpy())
    assert indices.dtype == ggrad.int64
    layer = getattr(nn, f"MaxPool{dims}d")(**kwargs, return_indices=True)
    np.testing.assert_array_equal(layer(ggrad.tensor(x))[1].numpy(), tindices.numpy())


@pytest.mark.parametrize("kwargs", [dict(kernel_size=2), dict(kernel_size=3, stride=1, dilation=2),
                                    dict(kernel_size=2, ceil_mode=True)], ids=["fused", "dilated", "ceil"])
def test_max_pool_ties_send_the_gradient_to_the_first_maximum(kwargs):
    x = np.maximum(randn(2, 2, 7, 7), 0).round(0)   # many equal values, as after a ReLU
    ours, theirs = pair("MaxPool2d", kwargs)
    a, ta = leaf(x)
    compare(ours, theirs, [a], [ta])


def test_unbatched():
    for ours, theirs, shape in ((nn.MaxPool2d(3, 2, dilation=2), torch.nn.MaxPool2d(3, 2, dilation=2), (3, 8, 8)),
                                (nn.AvgPool1d(3, ceil_mode=True), torch.nn.AvgPool1d(3, ceil_mode=True), (3, 8))):
        x, tx = leaf(randn(*shape))
        compare(ours, theirs, [x], [tx])


def test_reprs():
    for kwargs in (dict(kernel_size=3), dict(kernel_size=(2, 3), stride=1, dilation=2, ceil_mode=True)):
        assert repr(nn.MaxPool2d(**kwargs)) == repr(torch.nn.MaxPool2d(**kwargs))
        assert repr(nn.AvgPool2d(**kwargs if "dilation" not in kwargs else {"kernel_size": 3})) == repr(
            torch.nn.AvgPool2d(**kwargs if "dilation" not in kwargs else {"kernel_size": 3}))
    assert repr(nn.MaxPool1d(2)) == repr(torch.nn.MaxPool1d(2))
    assert repr(nn.AvgPool1d(3, padding=1)) == repr(torch.nn.AvgPool1d(3, padding=1))


def test_errors():
    with pytest.raises(RuntimeError, match="at most half of kernel size"):
        F.max_pool2d(ggrad.tensor(randn(1, 1, 4, 4)), 2, padding=2)
    with pytest.raises(RuntimeError, match="smaller than the kernel"):
        F.max_pool1d(ggrad.tensor(randn(1, 1, 2)), 5)
    with pytest.raises(RuntimeError, match="smaller than the kernel"):
        F.max_pool2d(ggrad.tensor(randn(1, 1, 4, 4)), 2, dilation=4)
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        F.avg_pool2d(ggrad.tensor(randn(1, 1, 4, 4)), 2, divisor_override=0)
    with pytest.raises(RuntimeError, match=r"expected 2-D \(C, L\) or 3-D"):
        F.avg_pool1d(ggrad.tensor(randn(4)), 2)
