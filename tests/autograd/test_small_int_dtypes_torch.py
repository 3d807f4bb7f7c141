"""int8, uint8 and int16 against PyTorch: creation, promotion, wrap on overflow, conversions, comparisons,
bitwise ops, reductions, indexing rules and save/load."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

NAMES = ("int8", "uint8", "int16")
RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}


def pair(values, name):
    return ggrad.tensor(values, dtype=getattr(ggrad, name)), torch.tensor(values, dtype=getattr(torch, name))


def torch_dtype(dtype):
    """The torch dtype of the same name as ggrad's `dtype`."""
    names = {"f32": "float32", "i32": "int32", "i64": "int64", "i8": "int8", "u8": "uint8", "i16": "int16"}
    return getattr(torch, names.get(dtype.name, dtype.name))


def same(g, t):
    assert torch_dtype(g.dtype) == t.dtype, (g.dtype, t.dtype)
    np.testing.assert_array_equal(g.numpy(), t.numpy())
    assert g.numpy().dtype == t.numpy().dtype


@pytest.mark.parametrize("name", NAMES)
def test_numpy_arrays_give_the_dtype_and_read_back(name):
    a = np.array([1, 2, RANGES[name][0], RANGES[name][1]], dtype=name)
    for make in (ggrad.tensor, ggrad.from_numpy):
        same(make(a), torch.from_numpy(a))


@pytest.mark.parametrize("name", NAMES)
def test_arithmetic_wraps_as_torch(name):
    lo, hi = RANGES[name]
    g, t = pair([lo, hi, 3, 0], name)
    same(g + 1, t + 1)
    same(g - 1, t - 1)
    same(g * 3, t * 3)
    same(g + g, t + t)
    same(-g, -t)
    same(g + 300, t + 300)          # the Python int is cast (wrapped) first, the dtype stays
    same(g // 7, t // 7)
    same(g % 7, t % 7)


@pytest.mark.parametrize("a,b", [("uint8", "int8"), ("int8", "int16"), ("uint8", "int16"), ("int8", "int32"),
                                 ("uint8", "int64"), ("int16", "bool")])
def test_promotion_as_torch_result_type(a, b):
    ga, ta = pair([1, 2], a)
    gb, tb = ggrad.tensor([1, 0], dtype=getattr(ggrad, b)), torch.tensor([1, 0], dtype=getattr(torch, b))
    assert torch_dtype(ggrad.result_type(ga, gb)) == torch.result_type(ta, tb)
    same(ga + gb, ta + tb)


@pytest.mark.parametrize("name", NAMES)
def test_with_floats_and_zero_dim(name):
    g, t = pair([1, 2, 3], name)
    same(g * 1.5, t * 1.5)
    same(g / 2, t / 2)
    same(g + ggrad.tensor(1), t + torch.tensor(1))       # a 0-d int64 keeps the dimensioned dtype
    same(g + ggrad.tensor([1]), t + torch.tensor([1]))   # a 1-d int64 wins


@pytest.mark.parametrize("name", NAMES)
def test_conversions_truncate_and_wrap(name):
    values = [300.7, -1.0, -129.0, 2.5, -2.5, 40000.0]
    g, t = ggrad.tensor(values), torch.tensor(values)
    same(g.to(getattr(ggrad, name)), t.to(getattr(torch, name)))
    gi, ti = ggrad.tensor([300, -1, 70000]), torch.tensor([300, -1, 70000])
    same(gi.to(getattr(ggrad, name)), ti.to(getattr(torch, name)))
    gs, ts = pair([5, -3 if name != "uint8" else 3], name)
    for other in ("float32", "int32", "int64", "bool", "int8", "uint8", "int16"):
        same(gs.to(getattr(ggrad, other)), ts.to(getattr(torch, other)))


def test_methods_and_type_names():
    g, t = ggrad.tensor([1.7, -2.2, 200.0]), torch.tensor([1.7, -2.2, 200.0])
    for m in ("char", "byte", "short"):
        same(getattr(g, m)(), getattr(t, m)())
    assert g.byte().type() == "ggrad.ByteTensor" and g.char().type() == "ggrad.CharTensor"
    assert g.short().type() == "ggrad.ShortTensor" and ggrad.short is ggrad.int16
    assert g.byte().element_size() == 1 and g.short().element_size() == 2


@pytest.mark.parametrize("name", NAMES)
def test_comparisons_bitwise_reductions(name):
    lo, hi = RANGES[name]
    g, t = pair([lo, 5, hi, 6], name)
    h, u = pair([5, 5, 0, 3], name)
    for op in ("__eq__", "__lt__", "__ge__", "__and__", "__or__", "__xor__"):
        same(getattr(g, op)(h), getattr(t, op)(u))
    same(~g, ~t)
    same(g & 6, t & 6)
    same(g.sum(), t.sum())
    same(g.max(), t.max())
    same(g.argmax(), t.argmax())


def test_creation_out_of_range_raises_as_torch():
    with pytest.raises(RuntimeError):
        torch.tensor([300], dtype=torch.uint8)
    with pytest.raises(RuntimeError, match="overflow"):
        ggrad.tensor([300], dtype=ggrad.uint8)
    with pytest.raises(RuntimeError, match="overflow"):
        ggrad.tensor([-129], dtype=ggrad.int8)


def test_indexing_by_small_ints_as_torch():
    a = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    g, t = ggrad.tensor(a), torch.tensor(a)
    for name in ("int8", "int16"):
        with pytest.raises(IndexError):
            t[torch.tensor([0, 1], dtype=getattr(torch, name))]
        with pytest.raises(IndexError):
            g[ggrad.tensor([0, 1], dtype=getattr(ggrad, name))]
    with pytest.warns(UserWarning, match="uint8"):
        got = g[ggrad.tensor([1, 0, 1], dtype=ggrad.uint8)]    # uint8 is a (deprecated) mask
    with pytest.warns(UserWarning):
        want = t[torch.tensor([1, 0, 1], dtype=torch.uint8)]
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("suffix", [".gguf", ".npz"])
def test_save_load_keeps_dtype_and_values(tmp_path, suffix):
    state = {name: ggrad.tensor(np.array(RANGES[name], dtype=name)) for name in NAMES}
    path = str(tmp_path / ("small" + suffix))
    ggrad.save(state, path)
    back = ggrad.load(path)
    for name in NAMES:
        assert back[name].dtype is getattr(ggrad, name)
        np.testing.assert_array_equal(back[name].numpy(), np.array(RANGES[name], dtype=name))


def test_float64_is_named_but_refused():
    with pytest.raises(TypeError, match="float64"):
        ggrad.randn(2).double()
    with pytest.raises(TypeError, match="float64"):
        ggrad.zeros(2, dtype=ggrad.float64)
    with pytest.raises(TypeError, match="float64"):
        ggrad.randn(2).to(ggrad.double)
    assert ggrad.tensor(np.zeros(2)).dtype is ggrad.float32   # float64 data becomes float32
