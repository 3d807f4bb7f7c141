"""x.view(dtype) against PyTorch: the bits of every pair of dtypes, shapes, PyTorch's errors."""

import itertools

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

NAMES = ("float32", "float16", "bfloat16", "int32", "int64", "int8", "uint8", "int16", "bool")


def source_bytes(src, dst, seed, rows=3, width=16):
    """Random bytes that both dtypes can hold in ggrad: bool bytes 0/1; int64 values inside int32."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=(rows, width), dtype=np.uint8)
    if src == "bool":
        raw &= 1
    if "int64" in (src, dst):
        words = raw.reshape(rows, width // 8, 8)
        words[..., 4:] = 0
        words[..., 3] &= 0x7F if src != "bool" else 1
    if src == "bfloat16":   # a bf16 NaN's payload does not survive GGML's float32 -> bf16 upload
        halves = raw.view(np.uint16)
        nan = (halves & 0x7F80) == 0x7F80
        halves[nan] = 0
    return raw


def pair(raw, name):
    t = torch.from_numpy(raw.copy()).view(getattr(torch, name))
    if name == "bfloat16":
        g = ggrad.tensor(t.float().numpy(), dtype=ggrad.bfloat16)
    else:
        g = ggrad.tensor(t.numpy(), dtype=getattr(ggrad, name))
    return g, t


def torch_bits(t):
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    if t.dtype == torch.bool:
        return t.view(torch.uint8).numpy() != 0
    return t.numpy().view(np.uint8)


def ggrad_bits(g):
    a = g.numpy()
    if g.dtype is ggrad.bfloat16:
        return (a.view(np.uint32) >> 16).astype(np.uint16)
    if g.dtype is ggrad.bool:
        return a
    return np.ascontiguousarray(a).view(np.uint8)


@pytest.mark.parametrize("src,dst", list(itertools.product(NAMES, NAMES)))
def test_every_pair_reinterprets_bits_as_torch(src, dst):
    raw = source_bytes(src, dst, seed=NAMES.index(src) * 10 + NAMES.index(dst))
    g, t = pair(raw, src)
    gv, tv = g.view(getattr(ggrad, dst)), t.view(getattr(torch, dst))
    assert gv.shape == tuple(tv.shape)
    assert gv.dtype is getattr(ggrad, dst)
    np.testing.assert_array_equal(ggrad_bits(gv), torch_bits(tv))


def test_bytes_other_than_one_read_as_true():
    raw = np.array([0, 1, 2, 255], dtype=np.uint8)
    g, t = ggrad.tensor(raw, dtype=ggrad.uint8), torch.from_numpy(raw)
    np.testing.assert_array_equal(g.view(ggrad.bool).numpy(), t.view(torch.bool).view(torch.uint8).numpy() != 0)


def test_same_size_view_of_a_strided_tensor():
    a = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    g, t = ggrad.tensor(a), torch.from_numpy(a)
    gv, tv = g.t()[1:, ::2].view(ggrad.int32), t.t()[1:, ::2].view(torch.int32)
    np.testing.assert_array_equal(gv.numpy(), tv.numpy())


def test_result_has_no_history_as_torch():
    a = np.ones((2, 4), np.float32)
    g, t = ggrad.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    for gd, td in ((ggrad.float32, torch.float32), (ggrad.float16, torch.float16), (ggrad.int32, torch.int32)):
        gv, tv = (g * 2).view(gd), (t * 2).view(td)
        assert (gv.requires_grad, gv.grad_fn is None) == (tv.requires_grad, tv.grad_fn is None) == (False, True)


def test_deliberate_copy_does_not_share_storage():
    g = ggrad.zeros(2, 2)
    v = g.view(ggrad.int32)
    g.add_(1.0)
    assert v.numpy().tolist() == [[0, 0], [0, 0]]


CASES = [
    (lambda m: m.tensor(1.0), "float16"),                                        # 0-d, other element size
    (lambda m: m.ones(3, 3), "int64"),                                           # last size not divisible
    (lambda m: m.ones(3, 4).t(), "float16"),                                     # downsizing, stride(-1) != 1
    (lambda m: m.ones(3, 4).t(), "int64"),                                       # upsizing, stride(-1) != 1
    (lambda m: m.ones(3, 4)[:, 1:3], "int64"),                                   # storage offset
    (lambda m: m.ones(3, 5)[:, :4], "int64"),                                    # stride(0) not divisible
    (lambda m: m.ones(3, 4, dtype=m.uint8)[:, 1:], "int16"),                     # 3 bytes into shorts
]


@pytest.mark.parametrize("make,dst", CASES)
def test_errors_as_torch(make, dst):
    with pytest.raises(RuntimeError) as expected:
        make(torch).view(getattr(torch, dst))
    with pytest.raises(RuntimeError) as got:
        make(ggrad).view(getattr(ggrad, dst))
    assert str(got.value) == str(expected.value)


def test_allowed_edge_shapes_as_torch():
    for shape, src, dst in (((0, 4), "float32", "float16"), ((2, 1), "int8", "bool"), ((5,), "int16", "bfloat16"),
                            ((1, 8), "uint8", "int64")):
        t = torch.zeros(shape, dtype=getattr(torch, src))
        g = ggrad.zeros(shape, dtype=getattr(ggrad, src))
        assert g.view(getattr(ggrad, dst)).shape == tuple(t.view(getattr(torch, dst)).shape)


def test_float64_is_refused():
    with pytest.raises(ggrad.DTypeError):
        ggrad.ones(2, 2).view(ggrad.float64)
