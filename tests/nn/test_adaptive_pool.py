"""Adaptive average pooling against PyTorch: uneven windows, None sizes, 3-D inputs, gradients, errors."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import ggrad  # noqa: E402

CASES = [
    ("adaptive_avg_pool2d", (2, 3, 7, 5), (3, 2)),
    ("adaptive_avg_pool2d", (2, 3, 6, 6), 1),
    ("adaptive_avg_pool2d", (3, 5, 4), (None, 3)),
    ("adaptive_avg_pool2d", (1, 2, 3, 3), (5, 4)),  # more outputs than inputs: overlapping windows
    ("adaptive_avg_pool1d", (2, 3, 10), 4),
    ("adaptive_avg_pool1d", (3, 7), 3),
]


@pytest.mark.parametrize("fn, shape, output_size", CASES)
def test_values_and_gradients_match_pytorch(fn, shape, output_size):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    xt, xg = torch.tensor(x, requires_grad=True), ggrad.tensor(x, requires_grad=True)
    yt, yg = getattr(torch.nn.functional, fn)(xt, output_size), getattr(ggrad.nn.functional, fn)(xg, output_size)
    np.testing.assert_allclose(yg.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    w = np.cos(np.arange(yt.numel(), dtype=np.float32)).reshape(yt.shape)
    (yt * torch.tensor(w)).sum().backward()
    (yg * ggrad.tensor(w)).sum().backward()
    np.testing.assert_allclose(xg.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_layers_match_the_functions():
    x = ggrad.tensor(np.arange(2 * 3 * 4 * 4, dtype=np.float32).reshape(2, 3, 4, 4))
    assert ggrad.nn.AdaptiveAvgPool2d((1, 1))(x).shape == (2, 3, 1, 1)
    np.testing.assert_allclose(ggrad.nn.AdaptiveAvgPool2d(2)(x).numpy(),
                               torch.nn.AdaptiveAvgPool2d(2)(torch.tensor(x.numpy())).numpy())
    assert ggrad.nn.AdaptiveAvgPool1d(2)(x[0]).shape == (3, 4, 2)


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="expected a 3-D or 4-D input"):
        ggrad.nn.functional.adaptive_avg_pool2d(ggrad.ones(4, 4), 2)
    with pytest.raises(ValueError, match="output_size must have 2 entries"):
        ggrad.nn.functional.adaptive_avg_pool2d(ggrad.ones(1, 4, 4), (1, 2, 3))
    with pytest.raises(ValueError, match="positive ints"):
        ggrad.nn.functional.adaptive_avg_pool2d(ggrad.ones(1, 4, 4), 0)
