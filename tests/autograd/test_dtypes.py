"""bool and int64 as PyTorch's: defaults, storage, conversions, result_type promotion; checked against torch."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

NAMES = {"float32": (ggrad.float32, torch.float32), "float16": (ggrad.float16, torch.float16),
         "bfloat16": (ggrad.bfloat16, torch.bfloat16), "int32": (ggrad.int32, torch.int32),
         "int64": (ggrad.int64, torch.int64), "bool": (ggrad.bool, torch.bool)}
OURS = {v[0]: k for k, v in NAMES.items()}
THEIRS = {v[1]: k for k, v in NAMES.items()}


def same_dtype(ours, theirs):
    assert OURS[ours.dtype] == THEIRS[theirs.dtype], (ours.dtype, theirs.dtype)


def test_defaults_follow_pytorch():
    for data in ([1, 2], [True, False], [1.5, 2.0], 3, True, np.array([1, 2], dtype=np.int32)):
        same_dtype(ggrad.tensor(data), torch.tensor(data))
    same_dtype(ggrad.arange(5), torch.arange(5))
    same_dtype(ggrad.full((2,), 3), torch.full((2,), 3))
    same_dtype(ggrad.full((2,), True), torch.full((2,), True))
    same_dtype(ggrad.randint(0, 5, (3,)), torch.randint(0, 5, (3,)))
    same_dtype(ggrad.randperm(4), torch.randperm(4))
    assert ggrad.long is ggrad.int64 and ggrad.tensor([1]).long().dtype is ggrad.int64


def test_numpy_gives_pytorchs_numpy_dtypes():
    assert ggrad.tensor([1, 2]).numpy().dtype == np.int64
    b = ggrad.tensor([True, False]).numpy()
    assert b.dtype == np.bool_ and b.tolist() == [True, False]
    assert repr(ggrad.tensor([True, False])) == "tensor([True, False])"


def test_int64_outside_32_bits_is_refused():
    with pytest.raises(OverflowError, match="int64"):
        ggrad.tensor([2**40])
    with pytest.raises(RuntimeError):
        ggrad.tensor([-2**31 - 1])
    assert ggrad.tensor([2**31 - 1, -2**31]).tolist() == [2**31 - 1, -2**31]


def test_index_results_are_int64():
    x = ggrad.tensor([[3.0, 1.0, 2.0], [0.5, 4.0, 4.0]])
    t = torch.tensor(x.numpy())
    for ours, theirs in ((x.argmax(), t.argmax()), (x.argmax(1), t.argmax(1)), (x.argmin(0), t.argmin(0)),
                         (x.topk(2).indices, t.topk(2).indices), (x.sort(1).indices, t.sort(1).indices),
                         (x.argsort(1), t.argsort(1)), ((x > 1).sum(), (t > 1).sum())):
        same_dtype(ours, theirs)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("target", list(NAMES))
def test_conversions(target):
    data = np.array([-2.7, -1.0, 0.0, 0.4, 1.5, 3.0], dtype=np.float32)
    ours, theirs = NAMES[target]
    for src in ("float32", "int64", "bool", "int32"):
        a = ggrad.tensor(data).to(NAMES[src][0])
        t = torch.tensor(data).to(NAMES[src][1])
        out, ref = a.to(ours), t.to(theirs)
        same_dtype(out, ref)
        np.testing.assert_allclose(out.float().numpy(), ref.float().numpy(), rtol=1e-2)
    x = ggrad.tensor(data)
    assert x.type(ours).dtype is ours and x.type() == "ggrad.FloatTensor"
    assert x.bool().dtype is ggrad.bool and x.int().dtype is ggrad.int32 and x.half().dtype is ggrad.float16


def test_is_floating_point():
    for name, (ours, theirs) in NAMES.items():
        x = ggrad.tensor([1, 0]).to(ours)
        assert x.is_floating_point() == torch.is_floating_point(torch.tensor([1, 0]).to(theirs)), name
        assert ggrad.is_floating_point(x) == x.is_floating_point()


OPERANDS = {
    "int64": lambda m: m.tensor([1, -2, 3]), "int32": lambda m: m.tensor([4, 5, -6], dtype=m.int32),
    "bool": lambda m: m.tensor([True, False, True]), "float32": lambda m: m.tensor([0.5, -1.5, 2.0]),
    "float16": lambda m: m.tensor([0.5, 1.5, 2.0], dtype=m.float16),
    "bfloat16": lambda m: m.tensor([0.5, 1.5, 2.0], dtype=m.bfloat16),
    "int64_0d": lambda m: m.tensor(7), "float32_0d": lambda m: m.tensor(2.5),
    "py_int": lambda m: 3, "py_float": lambda m: 1.5, "py_bool": lambda m: True,
}
PAIRS = [(a, b) for a in OPERANDS for b in OPERANDS if not (a.startswith("py") and b.startswith("py"))]


@pytest.mark.parametrize("a,b", PAIRS)
def test_result_type_and_arithmetic_match_pytorch(a, b):
    ga, gb = OPERANDS[a](ggrad), OPERANDS[b](ggrad)
    ta, tb = OPERANDS[a](torch), OPERANDS[b](torch)
    assert OURS[ggrad.result_type(ga, gb)] == THEIRS[torch.result_type(ta, tb)]
    for op in (lambda x, y: x + y, lambda x, y: x * y, lambda x, y: x / y):
        try:
            ref = op(ta, tb)
        except RuntimeError:
            continue
        out = op(ga, gb)
        same_dtype(out, ref)
        np.testing.assert_allclose(out.float().numpy(), ref.float().numpy(), rtol=1e-2)


def test_pow_and_matmul_dtypes():
    i = ggrad.tensor([1, 4, 9])
    same_dtype(i ** 0.5, torch.tensor([1, 4, 9]) ** 0.5)
    np.testing.assert_allclose((i ** 0.5).numpy(), [1, 2, 3], rtol=1e-6)
    same_dtype(i ** 2, torch.tensor([1, 4, 9]) ** 2)
    h = ggrad.ones(2, 3, dtype=ggrad.float16)
    assert (h @ h.T).dtype is ggrad.float16
    assert (ggrad.tensor([1.0, 2.0], dtype=ggrad.float16) * 2.0).dtype is ggrad.float16


def test_save_load_keeps_bool_and_int64(tmp_path):
    obj = {"ids": ggrad.tensor([1, -2]), "mask": ggrad.tensor([True, False])}
    ggrad.save(obj, tmp_path / "a.pt")
    back = ggrad.load(tmp_path / "a.pt")
    assert back["ids"].dtype is ggrad.int64 and back["mask"].dtype is ggrad.bool
    assert back["ids"].tolist() == [1, -2] and back["mask"].tolist() == [True, False]


@pytest.mark.parametrize("values", [np.array([1, 2, 3], np.int32), np.array([True, False, True])],
                         ids=["int32", "bool"])
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scans_of_integers_and_bools_are_int64_as_pytorch(values, op):
    ours = getattr(ggrad, op)(ggrad.tensor(values), 0)
    theirs = getattr(torch, op)(torch.tensor(values), 0)
    assert ours.dtype is ggrad.int64 and theirs.dtype is torch.int64
    assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_nan_to_num_of_half_types_uses_their_largest_finite_value(name):
    ours_dt, theirs_dt = NAMES[name]
    values = np.array([np.inf, -np.inf, np.nan, 1.0], np.float32)
    ours = ggrad.nan_to_num(ggrad.tensor(values).to(ours_dt))
    theirs = torch.nan_to_num(torch.tensor(values).to(theirs_dt))
    np.testing.assert_array_equal(ours.float().numpy(), theirs.float().numpy())


def test_numpy_scalars_and_0d_arrays_are_numbers():
    """numpy scalars promote as PyTorch's; a 0-d float64 array is float64 in PyTorch, which GGML cannot hold,
    so ggrad keeps float32 there (values equal)."""
    for operand in (np.float32(2.0), np.int64(2)):
        ours, theirs = ggrad.tensor([1.0]) + operand, torch.tensor([1.0]) + operand
        assert ours.numpy().tolist() == theirs.numpy().tolist()
        assert ours.dtype is ggrad.float32 and theirs.dtype is torch.float32
    assert (ggrad.tensor([1.0]) + np.array(2.0)).numpy().tolist() == [3.0]   # raised TypeError before
    assert ggrad.result_type(ggrad.tensor([1]), np.float64(2.0)) is ggrad.float32


def test_negating_a_bool_tensor_raises_as_pytorch():
    with pytest.raises(RuntimeError, match="on a bool tensor is not supported"):
        -torch.tensor([True])
    with pytest.raises(RuntimeError, match="on a bool tensor is not supported"):
        -ggrad.tensor([True])


def test_masked_select_broadcasts_both_and_logspace_matches_pytorch():
    mask = [[True, False], [False, True]]
    ours = ggrad.tensor([1.0, 2.0]).masked_select(ggrad.tensor(mask))
    theirs = torch.tensor([1.0, 2.0]).masked_select(torch.tensor(mask))
    assert ours.numpy().tolist() == theirs.numpy().tolist()
    np.testing.assert_allclose(ggrad.logspace(-1, 2, 7, base=2.0).numpy(),
                               torch.logspace(-1, 2, 7, base=2.0).numpy(), rtol=1e-6)


def test_int64_and_bool_arguments_can_be_keyed_by_the_graph_cache():
    from ggrad.autograd.trace_cache import attr_key
    assert attr_key(ggrad.int64) is ggrad.int64 and attr_key(ggrad.bool) is ggrad.bool


def test_dtypes_print_as_torchs():
    torch = pytest.importorskip("torch")
    for name in ("float32", "float16", "bfloat16", "float64", "int32", "int64", "int16", "int8", "uint8", "bool"):
        ours = getattr(ggrad, name)
        assert str(ours) == repr(ours) == str(getattr(torch, name)).replace("torch.", "ggrad.")
    assert repr(ggrad.ggml.as_dtype("q4_0")) == "ggrad.q4_0"   # GGML's own types keep GGML's names


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_input_kept_for_backward_as_torch(dtype):
    """An op computed in float32 keeps its half input for backward in its own dtype (dtype_rules._kept_half):
    the gradient is torch's, and the input modified in place before backward makes it raise, as torch."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    grads = []
    for lib in (ggrad, torch):
        xt = lib.tensor(x, requires_grad=True)
        h = (xt * 2.0).to(getattr(lib, dtype))
        y = lib.nn.functional.gelu(h, approximate="tanh")
        y.float().sum().backward()
        grads.append(xt.grad.numpy() if lib is ggrad else xt.grad.detach().numpy())
        h2 = (xt * 2.0).to(getattr(lib, dtype))
        y2 = lib.nn.functional.gelu(h2, approximate="tanh")
        h2.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y2.float().sum().backward()
    np.testing.assert_allclose(grads[0], grads[1], rtol=2e-2, atol=2e-2)
