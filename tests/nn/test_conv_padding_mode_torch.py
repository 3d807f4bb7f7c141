"""Conv1d/Conv2d padding_mode ('zeros', 'reflect', 'replicate', 'circular') against PyTorch: outputs and the
gradients of the input, weight and bias on copied weights, with int, per-dimension and 'same' padding."""

import pytest

import ggrad.nn as nn

torch = pytest.importorskip("torch")
from torch_parity_util import compare, copy_weights, leaf, randn  # noqa: E402  (needs torch)

MODES = ["zeros", "reflect", "replicate", "circular"]


def pair(name, *args, **kwargs):
    torch.manual_seed(0)
    return copy_weights(getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kwargs", [dict(kernel_size=3, padding=1), dict(kernel_size=3, padding=2, stride=2),
                                    dict(kernel_size=4, padding="same", dilation=1),
                                    dict(kernel_size=3, padding="same", dilation=2)],
                         ids=["p1", "p2_stride2", "same_even_kernel", "same_dilated"])
def test_conv1d_padding_mode(mode, kwargs):
    ours, theirs = pair("Conv1d", 2, 3, padding_mode=mode, **kwargs)
    x, tx = leaf(randn(2, 2, 7))
    compare(ours, theirs, [x], [tx], atol=5e-5)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kwargs", [dict(kernel_size=3, padding=1), dict(kernel_size=(3, 2), padding=(2, 1)),
                                    dict(kernel_size=(2, 3), padding="same"),
                                    dict(kernel_size=3, padding=1, groups=2)],
                         ids=["p1", "per_dim", "same_uneven", "groups"])
def test_conv2d_padding_mode(mode, kwargs):
    ours, theirs = pair("Conv2d", 2, 4, padding_mode=mode, **kwargs)
    x, tx = leaf(randn(2, 2, 5, 6))
    compare(ours, theirs, [x], [tx], atol=5e-5)


def test_unbatched_and_repr():
    ours, theirs = pair("Conv2d", 2, 3, 3, padding=1, padding_mode="reflect")
    assert repr(ours) == repr(theirs)
    x, tx = leaf(randn(2, 5, 5))
    compare(ours, theirs, [x], [tx], atol=5e-5)


def test_padding_mode_errors():
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(2, 3, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match='Only "zeros" padding mode'):
        nn.ConvTranspose2d(2, 3, 3, padding_mode="reflect")
    conv = nn.Conv1d(1, 1, 3, padding=4, padding_mode="reflect")
    with pytest.raises(RuntimeError, match="reflect"):
        conv(leaf(randn(1, 1, 3))[0])   # torch: RuntimeError, padding must be less than the input size
