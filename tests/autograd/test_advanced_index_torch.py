"""Advanced indexing beyond one index tensor, as PyTorch's: several index tensors or lists in one key
(negative entries wrap), an index array beside integers and slices, Python bools, and assignment through
integer indices; values, shapes and gradients of x and of the written value, and the error types."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")


def _x(T, *shape, grad=False):
    n = int(np.prod(shape))
    return T.tensor((np.arange(n, dtype=np.float32).reshape(shape) - n / 2) / 4, requires_grad=grad)


READS = {
    "two_lists": lambda T, x: x[[0, 2], [1, -1]],
    "broadcast_lists": lambda T, x: x[[[0], [2]], [1, -1]],
    "tensors_around_a_slice": lambda T, x: x[T.tensor([0, 1]), :, T.tensor([3, -1])] if x.ndim == 3 else x[[0], [0]],
    "slice_then_two_lists": lambda T, x: x[:, [0, 2], [1, 1]] if x.ndim == 3 else x[[1], [1]],
    "int_and_2d_tensor": lambda T, x: x[1, T.tensor([[0, 1], [2, -1]])],
    "repeated_positions": lambda T, x: x[[0, 2, 0], [1, -1, 1]],
    "python_true": lambda T, x: x[True],
    "python_false_and_int": lambda T, x: x[False, 1],
    "numpy_arrays": lambda T, x: x[np.array([1, 0]), np.array([-1, 2])],
}


@pytest.mark.parametrize("shape", [(3, 4), (3, 4, 5)], ids=str)
@pytest.mark.parametrize("name", sorted(READS))
def test_reads_and_gradients_match_torch(name, shape):
    results = []
    for T in (torch, ggrad):
        x = _x(T, *shape, grad=True)
        y = READS[name](T, x)
        w = T.tensor(np.linspace(-1, 2, int(np.prod(y.shape)), dtype=np.float32).reshape(tuple(y.shape)))
        (y * w).sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy()))
    (ty, tg), (gy, gg) = results
    assert gy.shape == ty.shape
    np.testing.assert_allclose(gy, ty)
    np.testing.assert_allclose(gg, tg)


def _writes(T, x, v):
    x[T.tensor([1, -1])] = v[:3]
    x[[0, 2], [1, 0]] = v[3] * 2
    x[0, T.tensor([0, 2])] = v[4:6]
    x[:, [-1]] = -v[6]
    x[[3]] = 7.0
    return x


def test_writes_and_gradients_match_torch():
    results = []
    for T in (torch, ggrad):
        base = _x(T, 4, 3, grad=True)
        v = T.tensor(np.arange(10, 17, dtype=np.float32), requires_grad=True)
        y = _writes(T, base * 1, v)
        (y * _x(T, 4, 3)).sum().backward()
        results.append((y.detach().numpy(), base.grad.numpy(), v.grad.numpy()))
    for ours, theirs in zip(results[1], results[0]):
        np.testing.assert_allclose(ours, theirs)


BAD = {
    "read_out_of_range": lambda T: _x(T, 3, 4)[[0, 3], [1, 1]],
    "write_out_of_range": lambda T: _x(T, 3).__setitem__(T.tensor([3]), 1.0),
    "float_index_tensor": lambda T: _x(T, 3, 4)[[0, 1], T.tensor([1.0, 0.0])],
    "shapes_that_do_not_broadcast": lambda T: _x(T, 3, 4)[[0, 1], [0, 1, 2]],
    "negative_step": lambda T: _x(T, 3, 4)[::-1, [0, 1]],
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_keys_raise_torchs_error_type(name):
    with pytest.raises(Exception) as theirs:
        BAD[name](torch)
    with pytest.raises(theirs.type):
        BAD[name](ggrad)


def test_one_index_tensor_keeps_the_device_path():
    """x[idx] alone stays the view path's gather (no host read of idx): its count of computes shows it."""
    x = ggrad.arange(20).view(5, 4).float()
    idx = (ggrad.arange(3) * 2).long()       # computed on the device
    ggrad.reset_stats()
    y = x[idx] * 2
    assert ggrad.stats()["computes"] == 0
    np.testing.assert_array_equal(y.numpy(), (np.arange(20).reshape(5, 4)[[0, 2, 4]] * 2).astype(np.float32))
