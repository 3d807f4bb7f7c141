"""`x[index]` of host memory by host indices is gathered by numpy (ops/host_index.py): the same values,
dtypes, shapes and errors as PyTorch, no graph node, and the graph path still where a gradient is needed."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

DTYPES = [(ggrad.float32, torch.float32), (ggrad.float16, torch.float16), (ggrad.bfloat16, torch.bfloat16),
          (ggrad.int64, torch.int64), (ggrad.bool, torch.bool)]
INDICES = [[0, -1, 2], np.array([[1, 2], [5, 0]]), np.array([3, 3, -6], np.int32)]


@pytest.mark.parametrize("computed", [False, True], ids=["host data", "computed"])
@pytest.mark.parametrize("dtypes", DTYPES, ids=[str(t).split(".")[-1] for _, t in DTYPES])
@pytest.mark.parametrize("index", INDICES, ids=["list", "2-d array", "int32 array"])
@pytest.mark.parametrize("as_tensor", [False, True], ids=["host index", "index tensor"])
def test_gathers_as_pytorch(computed, dtypes, index, as_tensor):
    ours, theirs = dtypes
    values = np.arange(24, dtype=np.float32).reshape(6, 2, 2) - 7
    x = ggrad.tensor(values).to(ours)
    if computed:
        x.numpy()
    key = ggrad.tensor(np.asarray(index, np.int64)) if as_tensor else index
    got = x[key]
    want = torch.tensor(values).to(theirs)[torch.tensor(np.asarray(index, np.int64))]
    assert got.dtype is ours and got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


@pytest.mark.parametrize("row_shape", [(), (1,), (3,), (5,), (3, 2)], ids=str)
@pytest.mark.parametrize("dtypes", DTYPES, ids=[str(t).split(".")[-1] for _, t in DTYPES])
def test_rows_of_every_byte_width(row_shape, dtypes):
    """Rows of 1 to 40 bytes: gathered as 8-, 4- or 2-byte words where they divide a row, else as bytes."""
    ours, theirs = dtypes
    values = np.arange(7 * int(np.prod(row_shape)), dtype=np.float32).reshape((7,) + row_shape) % 5 - 2
    index = np.array([6, 0, -1, 3, 3], np.int64)
    got = ggrad.tensor(values).to(ours)[ggrad.tensor(index)]
    want = torch.tensor(values).to(theirs)[torch.tensor(index)]
    assert got.dtype is ours and got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


def test_is_gathered_on_the_host_without_a_graph_node():
    x = ggrad.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    x.numpy()
    got = x[ggrad.tensor([2, 0])]
    assert got._node.is_leaf   # host data to upload, not a get_rows node
    np.testing.assert_array_equal(got.numpy(), [[6, 7, 8], [0, 1, 2]])


def test_out_of_range_raises_index_error_as_pytorch():
    x = ggrad.tensor(np.zeros((3, 2), np.float32))
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x[[0, 3]]
    with pytest.raises(IndexError):
        torch.zeros(3, 2)[[0, 3]]


def test_a_tensor_that_requires_grad_takes_the_graph_path():
    w = ggrad.tensor(np.arange(6, dtype=np.float32).reshape(3, 2), requires_grad=True)
    w.numpy()
    picked = w[ggrad.tensor([2, 2, 0])]
    assert picked.grad_fn is not None
    picked.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[1, 1], [0, 0], [2, 2]])
