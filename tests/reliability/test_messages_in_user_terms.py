"""Messages in the user's terms: a shape error names the public op and the shapes as the user passed them,
in their order and layout. MultiheadAttention checked its inputs after moving them to (N, L, E), so with
batch_first=False its errors named transposed shapes; `a < b` named `sub` and the shapes swapped, `a % b`
and `a // b` named `div`, `a << b` named `mul`."""

import operator

import pytest

import ggrad

torch = pytest.importorskip("torch")

OPERATORS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
             "remainder": operator.mod, "floor_divide": operator.floordiv, "pow": operator.pow,
             "lt": operator.lt, "gt": operator.gt, "le": operator.le, "ge": operator.ge, "eq": operator.eq,
             "ne": operator.ne, "bitwise_and": operator.and_, "bitwise_or": operator.or_,
             "bitwise_xor": operator.xor, "bitwise_left_shift": operator.lshift,
             "bitwise_right_shift": operator.rshift, "fmod": torch.fmod, "maximum": torch.maximum}
BITWISE = ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift")


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_an_operator_names_itself_and_the_shapes_in_order(name):
    fn = OPERATORS[name]
    ours_fn = getattr(ggrad, name) if fn in (torch.fmod, torch.maximum) else fn
    dtype = "int" if name in BITWISE else "float"
    a, b = getattr(ggrad.ones(2, 3), dtype)(), getattr(ggrad.ones(4), dtype)()
    with pytest.raises(RuntimeError) as ours:
        ours_fn(a, b)
    with pytest.raises(RuntimeError):   # torch's type
        fn(getattr(torch.ones(2, 3), dtype)(), getattr(torch.ones(4), dtype)())
    assert str(ours.value).startswith(f"{name}: shapes (2, 3) and (4,)"), str(ours.value)


def test_matmul_names_itself_and_the_shapes_in_order():
    with pytest.raises(RuntimeError, match=r"matmul: shapes \(2, 3\) and \(4, 5\)"):
        ggrad.ones(2, 3) @ ggrad.ones(4, 5)


# (batch_first, query, key, value, what the message must hold besides the three shapes)
ATTENTION = [
    (False, (5, 2, 8), (7, 3, 8), (7, 3, 8), "(L, N, E)"),   # batch sizes differ
    (False, (5, 2, 8), (7, 2, 8), (6, 2, 8), "(L, N, E)"),   # key and value lengths differ
    (True, (2, 5, 8), (3, 7, 8), (3, 7, 8), "(N, L, E)"),
    (True, (2, 5, 8), (2, 7, 8), (2, 6, 8), "(N, L, E)"),
    (False, (5, 8), (7, 8), (6, 8), "(L, E)"),                 # unbatched
]


@pytest.mark.parametrize("batch_first, q, k, v, layout", ATTENTION)
def test_attention_errors_name_the_shapes_passed(batch_first, q, k, v, layout):
    mha = ggrad.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    with pytest.raises(RuntimeError) as ours:
        mha(ggrad.ones(*q), ggrad.ones(*k), ggrad.ones(*v))
    message = str(ours.value)
    assert f"query {q}, key {k} and value {v}" in message and layout in message, message
    with pytest.raises((RuntimeError, AssertionError)):   # torch refuses each too
        torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)(torch.ones(*q), torch.ones(*k), torch.ones(*v))


@pytest.mark.parametrize("batch_first, shape", [(False, (5, 2, 6)), (True, (2, 5, 6)), (False, (5, 6))])
def test_attention_embed_dim_error_names_the_query_as_passed(batch_first, shape):
    layout = "(L, E)" if len(shape) == 2 else "(N, L, E)" if batch_first else "(L, N, E)"
    with pytest.raises(RuntimeError) as ours:
        ggrad.nn.MultiheadAttention(8, 2, batch_first=batch_first)(ggrad.ones(*shape))
    assert f"query with embed_dim=8 features, got shape {shape} {layout}" in str(ours.value), str(ours.value)
