"""Integer division and remainder by zero raise PyTorch's RuntimeError("ZeroDivisionError"): at once for
host data and Python numbers, when the step computes for divisors computed on the device; floats divide
into inf and nan as PyTorch; a failed step's tensors keep failing with that error, host data stays."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

CALLS = {
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "div_trunc": lambda a, b: a.div(b, rounding_mode="trunc"),
    "div_floor": lambda a, b: a.div(b, rounding_mode="floor"),
    "fmod": lambda a, b: a.fmod(b),
    "remainder": lambda a, b: a.remainder(b),
}


@pytest.mark.parametrize("name", CALLS)
@pytest.mark.parametrize("divisor", ([0, 2], 0))
def test_integer_division_by_zero_raises_as_torch(name, divisor):
    call = CALLS[name]
    t_b = torch.tensor(divisor) if isinstance(divisor, list) else divisor
    g_b = ggrad.tensor(divisor) if isinstance(divisor, list) else divisor
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        call(torch.tensor([5, -7]), t_b)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        call(ggrad.tensor([5, -7]), g_b)


@pytest.mark.parametrize("name", CALLS)
def test_nonzero_integer_divisors_and_float_zeros_as_torch(name):
    call = CALLS[name]
    a, b = [5, -7, 9, -3], [2, 3, -4, -2]
    np.testing.assert_array_equal(call(ggrad.tensor(a), ggrad.tensor(b)).numpy(),
                                  call(torch.tensor(a), torch.tensor(b)).numpy())
    fa, fb = [5.0, -7.0, 0.0], [0.0, 0.0, 0.0]
    np.testing.assert_array_equal(call(ggrad.tensor(fa), ggrad.tensor(fb)).numpy(),
                                  call(torch.tensor(fa), torch.tensor(fb)).numpy())


def test_a_divisor_computed_on_the_device_fails_the_step_not_the_host_data():
    a = ggrad.tensor([5, 7])
    b = ggrad.tensor([0, 2]) * ggrad.tensor([1, 1])   # computed: checked by the compute
    quotient = a // b
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        quotient.numpy()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        b.float()    # a new Tensor on a failed result fails the same way (was an AttributeError)
    np.testing.assert_array_equal(a.numpy(), [5, 7])
    np.testing.assert_array_equal((a // ggrad.tensor([1, 2])).numpy(), [5, 3])
