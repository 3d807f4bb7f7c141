"""Sizes given to the factories (zeros, ones, empty, full, rand, new_zeros, new_ones, new_empty, new_full,
new_tensor) are checked as PyTorch checks them: the same shapes for good sizes, TypeError for floats, bools,
tensors and a missing size, RuntimeError for negative dimensions."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

SIZES = [(), ((),), ([],), (2,), (2, 3), ((2, 3),), ([2, 0],), (0,), (1.5,), ((2.0,),), (True,), (None,), ("a",),
         (-4,), ((2, -1),), ("tensor_1d",), ("tensor_0d",), (3, "tensor_0d")]


def _args(T, size):
    def one(s):
        if s == "tensor_1d":
            return T.tensor([2, 3])
        if s == "tensor_0d":
            return T.tensor(2)
        return s
    return tuple(one(s) for s in size)


def _outcome(call):
    try:
        return "ok", tuple(call().shape)
    except Exception as e:  # noqa: BLE001  (the type is what is compared)
        return "raised", type(e)


def _same(torch_side, ours):
    if torch_side[0] == "raised":
        assert ours[0] == "raised" and issubclass(ours[1], torch_side[1]), (torch_side, ours)
    else:
        assert ours == torch_side


@pytest.mark.parametrize("size", SIZES, ids=repr)
@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
def test_module_factories_check_sizes_as_torch(name, size):
    _same(_outcome(lambda: getattr(torch, name)(*_args(torch, size))),
          _outcome(lambda: getattr(ggrad, name)(*_args(ggrad, size))))


@pytest.mark.parametrize("size", SIZES, ids=repr)
@pytest.mark.parametrize("name", ["new_zeros", "new_ones", "new_empty"])
def test_new_factories_check_sizes_as_torch(name, size):
    def call(T):
        return lambda: getattr(T.ones(2, dtype=T.float16), name)(*_args(T, size))
    _same(_outcome(call(torch)), _outcome(call(ggrad)))


@pytest.mark.parametrize("size", [(2,), (2, 0), (), (-1,), (1.5,), "tensor_1d"], ids=repr)
@pytest.mark.parametrize("name", ["full", "new_full"])
def test_full_checks_sizes_as_torch(name, size):
    def call(T):
        s = T.tensor([2]) if size == "tensor_1d" else size
        return (lambda: T.full(s, 7)) if name == "full" else (lambda: T.ones(1).new_full(s, 7))
    _same(_outcome(call(torch)), _outcome(call(ggrad)))


def test_new_factories_keep_dtype_and_values():
    def made(T):
        x = T.ones(2, dtype=T.float16)
        return [x.new_zeros(2, 3), x.new_ones((2,)), x.new_full((2, 2), 3), x.new_tensor([1, 2]), x.new_zeros(()),
                x.new_ones(2, dtype=T.int64), T.arange(3).new_tensor([1.5]), x.new_zeros(3, T.tensor(2))]
    for ours, theirs in zip(made(ggrad), made(torch)):
        assert ours.numpy().dtype == theirs.numpy().dtype
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_new_tensor_refuses_a_str_as_torch():
    with pytest.raises(TypeError):
        torch.ones(1).new_tensor("abc")
    with pytest.raises(TypeError):
        ggrad.ones(1).new_tensor("abc")
