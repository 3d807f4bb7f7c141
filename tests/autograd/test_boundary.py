"""The public API's argument boundary: a non-Tensor argument is PyTorch's TypeError; an op's own bug is not."""

import pytest

import ggrad
from ggrad.autograd.boundary import NotATensorError, typed


def test_a_non_tensor_argument_is_a_type_error_naming_the_op():
    with pytest.raises(TypeError, match=r"exp\(\): argument .input. \(position 1\) must be Tensor, not str"):
        ggrad.exp("x")
    with pytest.raises(NotATensorError):
        ggrad.exp(None)
    with pytest.raises(TypeError, match="matmul"):
        ggrad.matmul(ggrad.ones(2, 2), None)


def test_an_attribute_error_inside_the_op_is_not_blamed_on_the_arguments():
    class Helper:
        pass

    def buggy(x):
        return Helper().missing   # an AttributeError on an object the caller never passed

    with pytest.raises(AttributeError) as info:
        typed(buggy, "buggy")(ggrad.ones(2))
    assert not isinstance(info.value, NotATensorError)
