"""ggrad.finfo / ggrad.iinfo report PyTorch's limits for each dtype (and refuse the other kind, TypeError), and
the masking idiom built on them runs."""

import pytest

import ggrad

torch = pytest.importorskip("torch")

FLOATS = ["float32", "float16", "bfloat16", "float", "half"]
INTS = ["int64", "int32", "int16", "int8", "uint8", "long"]


@pytest.mark.parametrize("name", FLOATS)
def test_finfo_as_torch(name):
    ours, theirs = ggrad.finfo(getattr(ggrad, name)), torch.finfo(getattr(torch, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert ggrad.finfo().dtype == torch.finfo().dtype


@pytest.mark.parametrize("name", INTS)
def test_iinfo_as_torch(name):
    ours, theirs = ggrad.iinfo(getattr(ggrad, name)), torch.iinfo(getattr(torch, name))
    assert (ours.bits, ours.min, ours.max, ours.dtype) == (theirs.bits, theirs.min, theirs.max, theirs.dtype)


@pytest.mark.parametrize("info,dtype", [("finfo", "int64"), ("iinfo", "float32"), ("iinfo", "bool")])
def test_the_other_kind_is_refused_as_torch(info, dtype):
    for T in (torch, ggrad):
        with pytest.raises(TypeError):
            getattr(T, info)(getattr(T, dtype))


def test_masking_with_the_smallest_float_as_torch():
    out = []
    for T in (torch, ggrad):
        scores = T.tensor([[1.0, 2.0, 3.0]]).half()
        masked = scores.masked_fill(T.tensor([[False, True, False]]), T.finfo(scores.dtype).min)
        out.append(masked.float().softmax(-1).numpy())
    assert (abs(out[0] - out[1]) < 1e-3).all()
