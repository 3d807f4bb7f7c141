"""RoPE (GGML's rope_ext) against a numpy rotation: both layouts, partial rotation, frequency factors, scaling;
the gradient is the inverse rotation (the map is linear and orthogonal); bad arguments raise."""

import numpy as np
import pytest

import ggrad
from ggrad.autograd.ops.rope import rope
from ggrad.ggml.errors import DTypeError, ShapeError


def rotate(x, positions, mode, base=10000.0, n_dims=None, factors=None, freq_scale=1.0):
    """numpy RoPE of x (T, H, D): the first n_dims dims of each head, adjacent pairs or halves."""
    d = x.shape[-1] if n_dims is None else n_dims
    inv = base ** (-np.arange(0, d, 2) / d) * freq_scale
    if factors is not None:
        inv = inv / factors[:d // 2]
    angle = positions[:, None, None] * inv[None, None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    y = x.astype(np.float64).copy()
    if mode == "normal":
        a, b = x[..., 0:d:2], x[..., 1:d:2]
        y[..., 0:d:2], y[..., 1:d:2] = a * cos - b * sin, a * sin + b * cos
    else:
        a, b = x[..., :d // 2], x[..., d // 2:d]
        y[..., :d // 2], y[..., d // 2:d] = a * cos - b * sin, a * sin + b * cos
    return y


@pytest.mark.parametrize("mode", ["normal", "neox"])
@pytest.mark.parametrize("n_dims, with_factors, freq_scale", [(None, False, 1.0), (8, False, 1.0), (None, True, 1.0),
                                                              (None, False, 0.25)])
def test_rope_and_its_gradient(mode, n_dims, with_factors, freq_scale):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 3, 16)).astype(np.float32)
    positions = np.array([0, 1, 2, 9, 3, 40], dtype=np.int32)
    factors = rng.uniform(1.0, 8.0, 8).astype(np.float32) if with_factors else None
    xt = ggrad.tensor(x, requires_grad=True)
    y = rope(xt, ggrad.tensor(positions), n_dims, mode, 10000.0,
             None if factors is None else ggrad.tensor(factors), freq_scale=freq_scale)
    np.testing.assert_allclose(y.numpy(), rotate(x, positions, mode, n_dims=n_dims, factors=factors,
                                                 freq_scale=freq_scale), atol=2e-5)
    g = rng.standard_normal(x.shape).astype(np.float32)
    (y * ggrad.tensor(g)).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), rotate(g, -positions, mode, n_dims=n_dims, factors=factors,
                                                       freq_scale=freq_scale), atol=2e-5)


def test_rope_errors():
    x = ggrad.zeros(4, 2, 8)
    pos = ggrad.tensor(np.arange(4, dtype=np.int32))
    with pytest.raises(ShapeError, match="tokens, heads, head_dim"):
        rope(ggrad.zeros(4, 8), pos)
    with pytest.raises(ShapeError, match="positions must be"):
        rope(x, ggrad.tensor(np.arange(3, dtype=np.int32)))
    with pytest.raises(ShapeError, match="n_dims=3"):
        rope(x, pos, n_dims=3)
    with pytest.raises(DTypeError, match="float32"):
        rope(x.half(), pos)
    with pytest.raises(ValueError, match="mode"):
        rope(x, pos, mode="pairs")
    with pytest.raises(TypeError, match="unexpected"):
        rope(x, pos, yarn=1)
