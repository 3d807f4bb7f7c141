"""Result dtypes and values of mixed-dtype calls, compared with PyTorch: integer powers (by squaring, exact
below 2**24), float math of integer tensors (float32), integer-preserving unary ops, shifts, cat promoting its
pieces, clamp with a float bound of an integer tensor, where between two numbers, and bool subtraction
refused (RuntimeError)."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

INTS = [-3, -1, 0, 2, 5]

CALLS = {
    "int_pow_int_tensor": lambda T: T.tensor([2, 3, 0, -3]) ** T.tensor([3, 2, 0, 5]),
    "number_pow_int_tensor": lambda T: 3 ** T.arange(12),
    "float_number_pow_int_tensor": lambda T: 2.5 ** T.arange(5),
    "int_pow_half": lambda T: T.arange(5) ** 0.5,
    "int_pow_float_tensor": lambda T: T.arange(4) ** T.tensor([0.5, 1.0, 2.0, 0.0]),
    "int_pow_negative_int_tensor": lambda T: T.tensor([2, 1, -1, -1, 0, 3]) ** T.tensor([-1, -4, -3, -2, -1, 0]),
    "int_pow_computed_exponent": lambda T: T.tensor([2, 3, 4]) ** (T.arange(3) * 2),
    "float_tensor_pow_int_tensor": lambda T: T.tensor([1.5, -2.0]) ** T.tensor([2, 3]),
    "abs_neg_sign_square_relu": lambda T: [f(T.tensor(INTS)) for f in (T.abs, T.neg, T.sign, T.square, T.relu)],
    "float_math_of_ints": lambda T: [f(T.tensor(INTS)) for f in (T.exp, T.sin, T.cos, T.tanh, T.sigmoid, T.erf,
                                                                 T.atan, T.asinh, T.expm1, T.sinh, T.reciprocal)],
    "float_math_of_positive_ints": lambda T: [f(T.tensor([1, 4, 9])) for f in (T.sqrt, T.log, T.log1p, T.log2,
                                                                                 T.rsqrt)],
    "float_math_of_bools": lambda T: [T.exp(T.tensor([True, False])), T.sqrt(T.tensor([True, False]))],
    "cat_int_and_float": lambda T: T.cat([T.arange(2), T.tensor([1.5])]),
    "cat_int32_and_int64": lambda T: T.cat([T.arange(2).int(), T.arange(2)]),
    "cat_half_and_float": lambda T: T.cat([T.ones(2).half(), T.ones(1)]),
    "cat_bool_and_int": lambda T: T.cat([T.tensor([True]), T.tensor([3])]),
    "cat_skips_legacy_empty": lambda T: T.cat([T.zeros(0), T.ones(2, 3)]),
    "stack_promotes": lambda T: T.stack([T.arange(2), T.tensor([0.5, 1.5])]),
    "clamp_int_float_bound": lambda T: [T.tensor([1, 5, 9]).clamp(max=2.5), T.tensor([1, 5, 9]).clamp(2, 6),
                                        T.tensor([1, 5]).clamp(T.tensor([1.5, 0.0]))],
    "shifts": lambda T: [T.tensor([5, -3, 12]) << 1, T.tensor([5, -3, 12]) >> 1, T.tensor([5, -3]) << T.tensor([0, 2]),
                         1 << T.tensor([3, 0]), -7 >> T.tensor([1, 2]), T.tensor([True]) << 1,
                         T.tensor([7], dtype=T.int32) >> 1, T.bitwise_left_shift(T.tensor([3]), 4)],
    "where_two_numbers": lambda T: [T.where(T.tensor([True, False]), 1, 0), T.where(T.tensor([True, False]), 1.0, 0),
                                    T.where(T.tensor([True, False]), True, False)],
}


def _numpy(value):
    if isinstance(value, (list, tuple)):
        return [_numpy(v) for v in value]
    return value.detach().numpy()


def _same(ours, theirs):
    if isinstance(theirs, list):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same(a, b)
        return
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_result_dtype_and_values_match_torch(name):
    _same(_numpy(CALLS[name](ggrad)), _numpy(CALLS[name](torch)))


BAD = {
    "bool_minus_bool": lambda T: T.tensor([True, False]) - T.tensor([True, True]),
    "bool_minus_int": lambda T: T.tensor([True, False]) - 1,
    "int_minus_bool": lambda T: T.arange(2) - T.tensor([True, False]),
    "bool_sub_method": lambda T: T.tensor([True]).sub(T.tensor([False])),
    "float_shift": lambda T: T.tensor([1.0]) << 1,
    "shift_by_float": lambda T: T.tensor([1]) >> 1.5,
    "int_to_negative_int_number": lambda T: T.tensor([2]) ** -1,
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_refused_as_torch(name):
    with pytest.raises(Exception) as theirs:
        BAD[name](torch)
    with pytest.raises(theirs.type):
        BAD[name](ggrad)
