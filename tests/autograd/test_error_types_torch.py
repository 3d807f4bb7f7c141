"""Error types of calls the bad-input family does not make (out-of-range narrow, gather and index values,
chunk and arange arguments, float subscripts, item() of many elements, bad keyword values), compared with
PyTorch: ggrad raises PyTorch's type (its errors may also inherit another builtin)."""

import pytest

import ggrad

torch = pytest.importorskip("torch")


def _x(T):
    return T.ones(2, 3)


CALLS = {
    "narrow_past_the_end": lambda T: _x(T).narrow(1, 2, 2),
    "narrow_start_below": lambda T: _x(T).narrow(1, -5, 1),
    "narrow_negative_length": lambda T: _x(T).narrow(1, 1, -1),
    "narrow_bad_dim": lambda T: _x(T).narrow(3, 0, 1),
    "chunk_zero": lambda T: _x(T).chunk(0),
    "chunk_negative": lambda T: _x(T).chunk(-1),
    "split_zero": lambda T: _x(T).split(0),
    "arange_step_zero": lambda T: T.arange(0, 1, 0),
    "arange_wrong_sign": lambda T: T.arange(0, -3, 1),
    "arange_wrong_sign_negative_step": lambda T: T.arange(0, 3, -1),
    "gather_index_past_the_end": lambda T: _x(T).gather(1, T.tensor([[0], [3]])),
    "gather_negative_index": lambda T: _x(T).gather(1, T.tensor([[0], [-1]])),
    "index_select_past_the_end": lambda T: _x(T).index_select(1, T.tensor([3])),
    "getitem_past_the_end": lambda T: _x(T)[T.tensor([2])],
    "float_subscript": lambda T: _x(T)[1.5],
    "float_subscript_after_none": lambda T: _x(T)[None, 1.0],
    "str_subscript": lambda T: _x(T)["a"],
    "float_slice_bound": lambda T: _x(T)[1.5:],
    "item_of_many": lambda T: _x(T).item(),
    "div_bad_rounding_mode": lambda T: _x(T).div(2, rounding_mode="x"),
    "sdpa_mask_and_causal": lambda T: T.nn.functional.scaled_dot_product_attention(
        T.ones(1, 2, 2), T.ones(1, 2, 2), T.ones(1, 2, 2), attn_mask=T.ones(2, 2, dtype=T.bool), is_causal=True),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_error_type_is_torchs(name):
    with pytest.raises(Exception) as theirs:
        CALLS[name](torch)
    with pytest.raises(theirs.type):
        CALLS[name](ggrad)
