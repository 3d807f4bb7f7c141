"""PyTorch's legacy constructors (`Tensor(2, 3)`, `Tensor(data)`, `LongTensor(...)`) checked against PyTorch."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

CASES = [(), (2, 3), (3,), (0,), ([1, 2],), ((2, 3),), ([[1.5, 2], [3, 4]],), (np.array([1, 2]),),
         ([True, False],)]
TYPES = ["Tensor", "FloatTensor", "LongTensor", "IntTensor", "ByteTensor", "BoolTensor", "HalfTensor",
         "ShortTensor", "CharTensor"]


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("args", CASES, ids=repr)
def test_shape_dtype_and_data_as_pytorch(name, args):
    theirs = getattr(torch, name)(*args)
    ours = getattr(ggrad, name)(*args)
    assert ours.shape == tuple(theirs.shape)
    assert ours.dtype.torch_name == str(theirs.dtype).removeprefix("torch.")
    if args and not isinstance(args[0], int):   # sizes leave PyTorch's memory uninitialised
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("args, error", [((2.5,), TypeError), ((-1,), RuntimeError), ((2, 3.0), TypeError),
                                         ((2, "a"), TypeError)])
def test_bad_arguments_raise_as_pytorch(args, error):
    with pytest.raises(error):
        torch.Tensor(*args)
    with pytest.raises(error, match="Tensor()"):
        ggrad.Tensor(*args)


def test_a_tensor_argument_is_an_alias_with_gradient():
    a = ggrad.ones(2, requires_grad=True)
    b = ggrad.Tensor(a)
    (b * 3).sum().backward()
    assert a.grad.tolist() == [3, 3]
    assert ggrad.Tensor(ggrad.tensor([1, 2])).dtype == ggrad.int64          # as PyTorch: kept as it is
    with pytest.raises(TypeError):
        torch.FloatTensor(torch.tensor([1, 2]))
    with pytest.raises(TypeError, match="FloatTensor"):
        ggrad.FloatTensor(ggrad.tensor([1, 2]))


def test_isinstance_and_type_conversion_as_pytorch():
    for name in TYPES[1:]:
        for t_dtype in ("float32", "int64", "bool"):
            theirs = torch.zeros(2, dtype=getattr(torch, t_dtype))
            ours = ggrad.zeros(2, dtype=getattr(ggrad, t_dtype))
            assert isinstance(ours, getattr(ggrad, name)) == isinstance(theirs, getattr(torch, name))
    assert ggrad.zeros(2).type(ggrad.LongTensor).dtype == ggrad.int64
    assert ggrad.zeros(2).type("torch.LongTensor").dtype == ggrad.int64
    assert not issubclass(ggrad.LongTensor, ggrad.Tensor) and not issubclass(torch.LongTensor, torch.Tensor)
    assert isinstance(ggrad.nn.Parameter(ggrad.Tensor(3, 4)), ggrad.nn.Parameter)


def test_double_tensor_names_float64_and_refuses_it():
    with pytest.raises(TypeError, match="float64"):
        ggrad.DoubleTensor(2)
