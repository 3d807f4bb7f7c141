"""F.grid_sample and F.affine_grid against PyTorch: values and the input's, grid's and theta's gradients for
2-D and 3-D, every mode (bicubic: 2-D), padding mode and align_corners; PyTorch's errors."""
import itertools

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
SHAPES = {2: ((4, 5), (3, 6)), 3: ((3, 4, 5), (2, 3, 4))}


@pytest.mark.parametrize("k, mode, padding_mode, align_corners", list(itertools.product(
    (2, 3), ("bilinear", "nearest"), ("zeros", "border", "reflection"), (False, True))) + list(itertools.product(
    (2,), ("bicubic",), ("zeros", "border", "reflection"), (False, True))))
def test_grid_sample(k, mode, padding_mode, align_corners):
    spatial, out_spatial = SHAPES[k]
    x = RNG.standard_normal((2, 3) + spatial).astype(np.float32)
    g = RNG.uniform(-1.6, 1.6, (2,) + out_spatial + (k,)).astype(np.float32)   # some points outside
    g.reshape(-1)[:4] = [-1.0, 1.0, 0.0, 1.0 / spatial[-1]]                     # edges and a pixel centre
    results = []
    for lib in (torch, ggrad):
        xi, gi = lib.tensor(x, requires_grad=True), lib.tensor(g, requires_grad=True)
        y = lib.nn.functional.grid_sample(xi, gi, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
        w = lib.tensor(np.linspace(-1, 1, int(np.prod(y.shape)), dtype=np.float32).reshape(tuple(y.shape)))
        (y * w).sum().backward()
        results.append([y.detach().numpy(), xi.grad.numpy(), gi.grad.numpy()])
    for ours, theirs in zip(results[1], results[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("k, align_corners", list(itertools.product((2, 3), (False, True, None))))
def test_affine_grid_and_sampling_through_it(k, align_corners):
    """A spatial transformer: theta -> affine_grid -> grid_sample, gradients back to theta and the input."""
    spatial, out_spatial = SHAPES[k]
    theta = (np.eye(k, k + 1) + 0.3 * RNG.standard_normal((2, k, k + 1))).astype(np.float32)
    x = RNG.standard_normal((2, 3) + spatial).astype(np.float32)
    results = []
    for lib in (torch, ggrad):
        t, xi = lib.tensor(theta, requires_grad=True), lib.tensor(x, requires_grad=True)
        grid = lib.nn.functional.affine_grid(t, (2, 3) + out_spatial, align_corners=align_corners)
        y = lib.nn.functional.grid_sample(xi, grid, align_corners=align_corners)
        ((y * y).sum() + (grid * grid).sum()).backward()
        results.append([grid.detach().numpy(), y.detach().numpy(), t.grad.numpy(), xi.grad.numpy()])
    for ours, theirs in zip(results[1], results[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_affine_grid_of_size_one_dims():
    for lib in (torch, ggrad):
        grid = lib.nn.functional.affine_grid(lib.tensor([[[1.0, 0.0, 0.5], [0.0, 2.0, 0.0]]]), (1, 1, 1, 3),
                                             align_corners=False)
        assert tuple(grid.shape) == (1, 1, 3, 2)
    np.testing.assert_allclose(grid.numpy(), torch.nn.functional.affine_grid(
        torch.tensor([[[1.0, 0.0, 0.5], [0.0, 2.0, 0.0]]]), (1, 1, 1, 3), align_corners=False).numpy(), atol=1e-6)


@pytest.mark.parametrize("call", [
    lambda lib: lib.nn.functional.grid_sample(lib.ones(1, 1, 3, 3), lib.zeros(1, 2, 2, 2), mode="cubic"),
    lambda lib: lib.nn.functional.grid_sample(lib.ones(1, 1, 3, 3), lib.zeros(1, 2, 2, 2), padding_mode="wrap"),
    lambda lib: lib.nn.functional.grid_sample(lib.ones(1, 1, 3, 3), lib.zeros(2, 2, 2, 2)),
    lambda lib: lib.nn.functional.grid_sample(lib.ones(1, 1, 3, 3), lib.zeros(1, 2, 2, 3)),
    lambda lib: lib.nn.functional.grid_sample(lib.ones(1, 1, 3, 3), lib.zeros(1, 2, 2, 2, 2)),
    lambda lib: lib.nn.functional.grid_sample(lib.ones(1, 1, 2, 3, 3), lib.zeros(1, 2, 2, 2, 3), mode="bicubic"),
    lambda lib: lib.nn.functional.affine_grid(lib.zeros(1, 2, 3), (1, 1, 4)),
    lambda lib: lib.nn.functional.affine_grid(lib.zeros(1, 3, 3), (1, 1, 4, 4)),
    lambda lib: lib.nn.functional.affine_grid(lib.zeros(1, 2, 3), (1, 1, 0, 4)),
    lambda lib: lib.nn.functional.affine_grid(lib.zeros(1, 2, 3, dtype=lib.int32), (1, 1, 4, 4))])
def test_errors_as_pytorchs(call):
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)):
        call(ggrad)


def test_align_corners_not_given_warns_as_pytorch():
    with pytest.warns(UserWarning, match="align_corners=False"):
        ggrad.nn.functional.affine_grid(ggrad.zeros(1, 2, 3), (1, 1, 2, 2))
    with pytest.warns(UserWarning, match="align_corners=False"):
        ggrad.nn.functional.grid_sample(ggrad.ones(1, 1, 2, 2), ggrad.zeros(1, 1, 1, 2))
