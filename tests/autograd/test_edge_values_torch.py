"""Edge values against PyTorch: nan in max/min/amax/amin/argmax/argmin (propagated, its first index
picked) and in sort/argsort/topk (ordered as the largest), nan_to_num with infinite replacements, amax
over several dims sharing the gradient of ties evenly, `1 ** nan`, integer and float tensors to integer
powers (exact products, not exp(p log x)), rows of infinities (a fully masked row's amax is -inf),
lists of Python bools as masks, and probability targets refusing ignore_index."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

NAN = float("nan")
ROWS = [[2.0, NAN, 1.0, NAN], [1.0, 3.0, 3.0, 0.0], [float("inf"), 1.0, NAN, 2.0], [-1.0, -1.0, -2.0, 5.0]]
# no ties, and nan and +inf never in one row: their order among themselves is GGML's (sorting.py)
SORT_ROWS = [[2.0, NAN, 1.0, -3.0], [1.0, 3.0, -float("inf"), 0.0], [float("inf"), 1.0, -2.0, 2.5],
             [-1.0, 4.0, NAN, 5.0]]
INF = float("inf")
INF_ROWS = [[-INF, -INF, -INF], [INF, INF, INF], [-3.4028235e38, -INF, -INF], [1.0, -INF, 2.0]]   # masked rows

CALLS = {
    "max_all": lambda T, x: x.max(),
    "min_all": lambda T, x: x.min(),
    "amax_rows": lambda T, x: x.amax(1),
    "amin_columns_keepdim": lambda T, x: x.amin(0, keepdim=True),
    "argmax_rows": lambda T, x: x.argmax(1),
    "argmin_rows": lambda T, x: x.argmin(1),
    "argmax_all": lambda T, x: x.argmax(),
    "max_dim": lambda T, x: tuple(x.max(1)),
    "min_dim": lambda T, x: tuple(x.min(0)),
    "one_to_nan": lambda T, x: x[1] ** NAN,
    "int_cubes": lambda T, x: T.arange(255) ** 3,
    "int_fourth_powers": lambda T, x: T.arange(60) ** 4,
    "int32_squares_times": lambda T, x: T.arange(40, dtype=T.int32) ** 4,
    "float_integer_powers": lambda T, x: [T.tensor([-3.5, -1.0, 0.5, 2.0, 100.0, -0.0]) ** p
                                          for p in (3, 4, 7, -3, 10)],
    "sort_nan": lambda T, x: tuple(T.tensor(SORT_ROWS).sort(1)),
    "sort_nan_descending": lambda T, x: tuple(T.tensor(SORT_ROWS).sort(dim=1, descending=True, stable=True)),
    "argsort_nan_columns": lambda T, x: T.tensor(SORT_ROWS).argsort(dim=0, stable=True),
    "topk_nan": lambda T, x: tuple(T.tensor(SORT_ROWS).topk(2, 1)),
    "topk_smallest_nan": lambda T, x: tuple(T.tensor(SORT_ROWS).topk(2, 1, largest=False)),
    "nan_to_num_infinite_replacements": lambda T, x: [x.nan_to_num(nan=float("inf")),
                                                      x.nan_to_num(posinf=float("inf"), neginf=NAN),
                                                      x.half().nan_to_num(posinf=1e6)],
    "infinite_rows": lambda T, x: [T.tensor(INF_ROWS).amax(1), T.tensor(INF_ROWS).amin(1),
                                   T.tensor(INF_ROWS).logsumexp(1), T.tensor(INF_ROWS).log_softmax(1)],
    "bool_list_read": lambda T, x: x[[True, False, True, False]],
    "bool_list_in_tuple": lambda T, x: x[:, [False, True, True, False]],
}


def _numpy(v):
    if isinstance(v, (list, tuple)):
        return [_numpy(u) for u in v]
    return v.detach().numpy()


def _same(ours, theirs):
    if isinstance(theirs, list):
        for a, b in zip(ours, theirs, strict=True):
            _same(a, b)
        return
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_edge_values_match_torch(name):
    _same(_numpy(CALLS[name](ggrad, ggrad.tensor(ROWS))), _numpy(CALLS[name](torch, torch.tensor(ROWS))))


def test_gradients_of_integer_powers_and_nan_free_max_match_torch():
    x = np.array([[-3.5, -1.0, 0.5], [2.0, 3.0, 3.0]], np.float32)
    grads = []
    for T in (torch, ggrad):
        t = T.tensor(x, requires_grad=True)
        ((t ** 3).sum() + (t ** -2).sum() + t.max() + t.amax(1).sum() + t.max(0).values.sum()).backward()
        grads.append(t.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5)


@pytest.mark.parametrize("dims", [(0, 2), (1, 3, 4), (0, 1, 2, 3, 4), (4, 0)], ids=str)
def test_amax_over_several_dims_shares_ties_evenly_as_torch(dims):
    x = np.random.default_rng(1).integers(0, 3, (2, 3, 4, 2, 3)).astype(np.float32)   # many ties
    out = []
    for T in (torch, ggrad):
        t = T.tensor(x, requires_grad=True)
        y = t.amax(dims)
        (y * T.arange(y.numel()).float().reshape(tuple(y.shape))).sum().backward()
        out.append((y.detach().numpy(), t.grad.numpy()))
    np.testing.assert_array_equal(out[1][0], out[0][0])
    np.testing.assert_allclose(out[1][1], out[0][1], atol=1e-6)


def test_bool_list_write_as_torch():
    out = []
    for T in (torch, ggrad):
        x = T.zeros(2, 3)
        x[[True, False]] = 5.0
        x[:, [False, True, False]] = -1.0
        out.append(x.numpy())
    np.testing.assert_array_equal(out[1], out[0])


def test_probability_targets_refuse_ignore_index_as_torch():
    with pytest.raises(RuntimeError):
        torch.nn.functional.cross_entropy(torch.ones(2, 3), torch.full((2, 3), 1 / 3), ignore_index=1)
    with pytest.raises(RuntimeError):
        ggrad.nn.functional.cross_entropy(ggrad.ones(2, 3), ggrad.full((2, 3), 1 / 3), ignore_index=1)


def test_gradients_at_zero_as_torch():
    """abs, sqrt, pow and relu at 0: PyTorch's subgradient choices (0, inf, p * 0 ** (p - 1), 0)."""
    x = np.array([0.0, -0.0, 2.0, -1.5], np.float32)
    grads = []
    for T in (torch, ggrad):
        out = []
        for f in (lambda t: t.abs(), lambda t: t.relu(), lambda t: t ** 2, lambda t: t ** 0, lambda t: t ** 1.5,
                  lambda t: T.pow(t, T.tensor([0.0, 1.0, 2.0, 3.0])), lambda t: t.sign()):
            t = T.tensor(x, requires_grad=True)
            f(t).sum().backward()
            out.append(t.grad.numpy())
        grads.append(out)
    for ours, theirs in zip(*grads[::-1]):
        np.testing.assert_allclose(ours, theirs, equal_nan=True)


@pytest.mark.parametrize("mask", [True, [True, False], np.array([True, False])], ids=["bool", "list", "numpy"])
def test_masked_fill_refuses_a_non_tensor_mask_as_torch(mask):
    with pytest.raises(TypeError):
        torch.ones(2).masked_fill(mask, 0.0)
    with pytest.raises(TypeError):
        ggrad.ones(2).masked_fill(mask, 0.0)
