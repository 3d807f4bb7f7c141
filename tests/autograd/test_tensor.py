"""The Tensor API: creation, attributes, reads, dtypes, devices, in-place rules, bad input."""

import numpy as np
import pytest

import ggrad


def test_creation_functions():
    assert ggrad.zeros(2, 3).shape == (2, 3) and ggrad.zeros((2, 3)).numpy().sum() == 0
    np.testing.assert_array_equal(ggrad.ones(3).numpy(), np.ones(3))
    np.testing.assert_array_equal(ggrad.full((2,), 7.5).numpy(), [7.5, 7.5])
    np.testing.assert_array_equal(ggrad.arange(5).numpy(), np.arange(5))
    assert ggrad.arange(5).dtype is ggrad.int64 and ggrad.arange(0.0, 1.0, 0.25).dtype is ggrad.float32
    np.testing.assert_array_equal(ggrad.eye(3).numpy(), np.eye(3))
    assert ggrad.empty(2, 2).shape == (2, 2)
    x = ggrad.tensor([[1, 2], [3, 4]])
    assert x.dtype is ggrad.int64 and x.tolist() == [[1, 2], [3, 4]]
    assert ggrad.zeros_like(x).dtype is ggrad.int64 and ggrad.ones_like(x).numpy().sum() == 4
    assert ggrad.full_like(x, 3.0, dtype=ggrad.float32).numpy().sum() == 12
    assert ggrad.tensor(3.5).shape == () and ggrad.tensor(3.5).item() == 3.5
    assert ggrad.from_numpy(np.ones((2, 2), np.float16)).dtype is ggrad.float16
    r = ggrad.randint(0, 5, (100,)).numpy()
    assert r.min() >= 0 and r.max() < 5


def test_manual_seed_is_reproducible():
    ggrad.manual_seed(42)
    a = ggrad.randn(5).numpy()
    b = ggrad.rand(5).numpy()
    ggrad.manual_seed(42)
    np.testing.assert_array_equal(a, ggrad.randn(5).numpy())
    np.testing.assert_array_equal(b, ggrad.rand(5).numpy())


def test_attributes_and_reads():
    x = ggrad.randn(2, 3, requires_grad=True)
    assert x.ndim == 2 and x.dim() == 2 and x.numel() == 6 and x.size() == (2, 3) and x.size(-1) == 3
    assert x.is_leaf and x.grad is None and x.grad_fn is None and x.device == ggrad.device("cpu")
    y = x * 2
    assert not y.is_leaf and y.grad_fn is not None and y.requires_grad
    assert "grad_fn=<MulBackward>" in repr(y) or "grad_fn=<ScaleBiasBackward>" in repr(y)
    assert "tensor([[" in repr(x) and "requires_grad=True" in repr(x)
    assert float(ggrad.tensor([2.5])) == 2.5 and int(ggrad.tensor([3])) == 3 and bool(ggrad.tensor(1.0))
    assert len(x) == 2 and [r.shape for r in x] == [(3,), (3,)]
    np.testing.assert_allclose(np.asarray(x), x.numpy())


def test_to_dtype_and_device():
    x = ggrad.tensor([1.5, -2.25, 3.0])
    h = x.to(ggrad.float16)
    assert h.dtype is ggrad.float16 and h.half().dtype is ggrad.float16
    np.testing.assert_allclose(h.float().numpy(), x.numpy())
    i = x.to(ggrad.int32)
    assert i.dtype is ggrad.int32 and i.tolist() == [1, -2, 3]
    b = x.to("bfloat16")
    np.testing.assert_allclose(b.numpy(), x.numpy())
    assert x.to("cpu").device == x.device
    assert x.to(dtype=ggrad.float32) is x


def test_integer_arithmetic_is_exact():
    a = ggrad.tensor([1, 2, 3])
    assert (a + a).tolist() == [2, 4, 6] and (a * 3).tolist() == [3, 6, 9] and (a - 5).dtype is ggrad.int64
    assert (-a).tolist() == [-1, -2, -3]


def test_detach_requires_grad_and_inplace_rules():
    x = ggrad.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="in-place"):
        x.add_(1.0)
    with ggrad.no_grad():
        x.add_(1.0)
    np.testing.assert_array_equal(x.numpy(), [2, 2, 2])
    assert x.is_leaf and x.requires_grad
    y = ggrad.ones(3)
    y += 2
    y *= ggrad.tensor([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(y.numpy(), [3, 6, 9])
    with pytest.raises(RuntimeError, match="only floating point"):
        ggrad.tensor([1, 2]).requires_grad_()
    d = (x * 2).detach()
    assert not d.requires_grad and d.grad_fn is None
    z = ggrad.zeros(2)
    z.copy_(ggrad.tensor([4.0, 5.0]))
    assert z.tolist() == [4.0, 5.0]


def test_retain_grad_on_non_leaf():
    x = ggrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.retain_grad()
    (y * y).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), 2 * 3 * np.array([1.0, 2.0]))


def test_comparisons_give_float_masks():
    a = ggrad.tensor([1.0, 2.0, 3.0])
    assert (a > 2).tolist() == [0, 0, 1] and (a < 2).tolist() == [1, 0, 0]
    assert (a >= 2).tolist() == [0, 1, 1] and (a <= 2).tolist() == [1, 1, 0]
    assert a.eq(2.0).tolist() == [0, 1, 0] and a.ne(2.0).tolist() == [1, 0, 1]


def test_argmax_and_max_with_indices():
    x = ggrad.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    assert x.argmax().item() == 3 and x.argmax(1).tolist() == [1, 0] and x.argmax(0).tolist() == [1, 0, 1]
    values, indices = x.max(1)
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]
    assert x.max().item() == 7.0 and x.min().item() == 0.0


BAD_INPUT = [
    (lambda: ggrad.randn(2, 3) @ ggrad.randn(4, 5), ValueError, "matmul"),
    (lambda: ggrad.randn(2, 3) + ggrad.randn(4, 5), ValueError, "broadcast"),
    (lambda: ggrad.randn(2, 3) * ggrad.randn(3, 2), ValueError, "cannot be broadcast"),
    (lambda: ggrad.randn(2, 3).reshape(4, 2), ValueError, "invalid for input of size 6"),
    (lambda: ggrad.randn(2, 3).reshape(-1, -1), ValueError, "only one dimension"),
    (lambda: ggrad.zeros(2, 3, 4, 5, 6).__setitem__((slice(1, None),) * 5, 1.0), RuntimeError, "slice_scatter"),
    (lambda: ggrad.randn(2, 3).permute(0, 0), ValueError, "permutation"),
    (lambda: ggrad.randn(2, 3)[5], IndexError, "out of bounds"),
    (lambda: ggrad.randn(2, 3)[0, 0, 0], IndexError, "too many indices"),
    (lambda: ggrad.randn(2, 3).sum(dim=3), IndexError, "Dimension out of range"),
    (lambda: ggrad.embedding(ggrad.tensor([0.5, 1.0]), ggrad.randn(3, 2)), TypeError, "integer"),
    (lambda: ggrad.index_select(ggrad.randn(3, 2), 0, ggrad.tensor([[0, 1]])), ValueError, "1-D"),
    (lambda: ggrad.randn(3).backward(), RuntimeError, "does not require grad"),
    (lambda: ggrad.randn(3, requires_grad=True).exp().backward(), RuntimeError, "scalar outputs"),
    (lambda: ggrad.randn(3, requires_grad=True).sum().backward(ggrad.ones(2)), RuntimeError, "gradient shape"),
    (lambda: ggrad.cross_entropy(ggrad.randn(4, 3), ggrad.tensor([0, 1])), ValueError, "target of shape"),
    (lambda: ggrad.cross_entropy(ggrad.randn(4, 3), ggrad.tensor([0, 1, 1, 0]), reduction="avg"), ValueError,
     "reduction"),
    (lambda: ggrad.layer_norm(ggrad.randn(2, 3), 4), ValueError, "normalized_shape"),
    (lambda: ggrad.conv2d(ggrad.randn(1, 3, 5, 5), ggrad.randn(2, 4, 3, 3)), ValueError, "channels"),
    (lambda: ggrad.device("tpu:7"), ValueError, "no device"),
    (lambda: ggrad.randn(2).to("float128"), ValueError, "no device"),
    (lambda: ggrad.cat([ggrad.randn(2, 3), ggrad.randn(3, 3)], 1), ValueError, "must match"),
    (lambda: ggrad.dropout(ggrad.randn(3), p=1.5), ValueError, "between 0 and 1"),
    (lambda: ggrad.randn(3).item(), ValueError, "cannot be converted"),
    (lambda: ggrad.gelu(ggrad.tensor([1, 2])), NotImplementedError, "floating point"),
    (lambda: ggrad.softmax_ext(ggrad.randn(2, 4), ggrad.zeros(2, 3)), ValueError, "mask"),
    (lambda: ggrad.linear(ggrad.randn(2, 3), ggrad.randn(4, 5)), ValueError, "in_features"),
]


@pytest.mark.parametrize("call,exc,message", BAD_INPUT, ids=[str(i) for i in range(len(BAD_INPUT))])
def test_bad_input_raises_clear_errors(call, exc, message):
    with pytest.raises(exc, match=message):
        call()


def test_mixing_devices_raises(monkeypatch):
    from ggrad.autograd.memory import graph_of
    from ggrad.ggml.errors import DeviceError
    a, b = ggrad.ones(2), ggrad.ones(2)

    class Other:
        torch_name = "cuda:9"
    monkeypatch.setattr(b, "device", Other())
    with pytest.raises(DeviceError, match="same device"):
        graph_of(a, b)
