"""Matrix products against torch, values, gradients and second derivatives, under each backend's choices
(lowering.py: the CPU's kernel, GGML's mul_mat as RPC servers run it, CUDA's out_prod weight gradients;
all built and run on the CPU). The product reads transposed operands by flags and folds a broadcast
weight's batches into one product (linalg.py): every form here takes another of those paths."""

import numpy as np
import pytest

import ggrad
from ggrad.autograd import execution, lowering

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)


def _data(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


X3, X4, W, B = _data(3, 5, 4), _data(2, 3, 5, 4), _data(6, 4), _data(6)
P, V, Q = _data(3, 5, 7), _data(3, 7, 4), _data(3, 6, 4)

FORMS = {   # name: (function of lib, operands)
    "linear_3d": (lambda L, x, w, b: L.nn.functional.linear(x, w, b), (X3, W, B)),
    "linear_4d": (lambda L, x, w, b: L.nn.functional.linear(x, w, b), (X4, W, B)),
    "linear_strided_rows": (lambda L, x, w: L.nn.functional.linear(x.transpose(0, 1), w), (X3, W)),
    "weight_with_leading_one": (lambda L, x, w: x @ w.unsqueeze(0).transpose(-1, -2), (X3, W)),
    "batched_x_at_w_t": (lambda L, q, k: q @ k.transpose(-1, -2), (X3, Q[:, :5])),
    "batched_a_at_b": (lambda L, p, v: p @ v, (P, V)),
    "batched_a_at_shared_b": (lambda L, a, b: a @ b, (X3, W.T.copy())),
    "shared_a_at_batched_b": (lambda L, a, b: a @ b, (W, V[:, :4, :])),
    "transposed_a_at_b": (lambda L, a, b: a.transpose(-1, -2) @ b, (P, _data(3, 5, 2))),
}

CHOICES = {"CPU": lowering.CPU, "RPC": lowering.RPC, "CUDA": lowering.CUDA}


def _run(lib, form, operands):
    fn, _ = FORMS[form]
    leaves = [lib.tensor(a, requires_grad=True) for a in operands]
    y = fn(lib, *leaves)
    weights = lib.tensor(np.linspace(-1, 1, int(np.prod(y.shape)), dtype=np.float32).reshape(tuple(y.shape)))
    grads = (lib.autograd.grad((y * weights).sum(), leaves, create_graph=True))
    # a second derivative through every first gradient (their products with the operands' transposes)
    sum(((g * g).sum() for g in grads), lib.tensor(0.0)).backward()
    second = [None if t.grad is None else t.grad.numpy() for t in leaves]
    return [y.detach().numpy()] + [g.detach().numpy() for g in grads] + second


@pytest.mark.parametrize("choices", sorted(CHOICES))
@pytest.mark.parametrize("form", sorted(FORMS))
def test_product_values_gradients_and_second_derivatives_match_torch(form, choices):
    operands = FORMS[form][1]
    expected = _run(torch, form, operands)
    with execution.forced_lowering(ggrad.device("cpu"), CHOICES[choices]):
        got = _run(ggrad, form, operands)
    for g, t in zip(got, expected):
        assert (g is None) == (t is None)   # a bias's second derivative is none, in both
        if t is not None:
            np.testing.assert_allclose(g, t, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("bias", [False, True])
def test_linear_records_no_reshape_and_one_weight_product(bias):
    """linear on (B, T, K) is one recorded op forward (the bias added in it) and one each for dx and dw
    without a bias; with it, one op for dx, dw and the bias's row sum (LinearGrads): the reshapes and
    transposes around them are views made inside those ops."""
    from ggrad.autograd import primitive
    recorded = []
    original = primitive.Primitive._record.__func__

    def record(cls, ctx, args, tensors):
        recorded.append(cls.__name__)
        return original(cls, ctx, args, tensors)

    x = ggrad.tensor(X3, requires_grad=True)
    w = ggrad.tensor(W, requires_grad=True)
    b = ggrad.tensor(B, requires_grad=True) if bias else None
    primitive.Primitive._record = classmethod(record)
    try:
        ggrad.nn.functional.linear(x, w, b).sum().backward()
    finally:
        primitive.Primitive._record = classmethod(original)
    expected = ["Linear", "LinearGrads"] if bias else ["MatMulNT", "MatMulNT", "WeightGrad"]
    assert sorted(n for n in recorded if n not in ("SumAll", "Expand")) == expected


@pytest.mark.parametrize("ta,tb,shared_b", [(ta, tb, shared) for ta in (False, True) for tb in (False, True)
                                             for shared in (False, True) if not (ta and shared)])
def test_product_with_transposed_operands_matches_torch(ta, tb, shared_b):
    """The product op itself, A @ B^T with a or b read transposed by its flags (the forms gradient products
    take; a transposed a only with b of a's batch dims), to second derivatives."""
    from ggrad.autograd.ops.products import MatMulNT
    a = _data(3, 4, 5) if ta else _data(3, 5, 4)
    b = _data(*(() if shared_b else (3,)), *((4, 6) if tb else (6, 4)))

    def flip(t, flag):
        return t.transpose(-1, -2) if flag else t

    def run(lib, product):
        leaves = [lib.tensor(v, requires_grad=True) for v in (a, b)]
        y = product(*leaves)
        grads = lib.autograd.grad((y * y).sum(), leaves, create_graph=True)
        sum(((g * g).sum() for g in grads), lib.tensor(0.0)).backward()
        return [y.detach().numpy()] + [g.detach().numpy() for g in grads] + [t.grad.numpy() for t in leaves]

    expected = run(torch, lambda x, w: flip(x, ta) @ flip(w, tb).transpose(-1, -2))
    got = run(ggrad, lambda x, w: MatMulNT.apply(x, w, ta, tb))
    for g, t in zip(got, expected):
        np.testing.assert_allclose(g, t, rtol=2e-5, atol=5e-5)


@pytest.mark.parametrize("choices", sorted(CHOICES))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shapes", [((3, 4, 5), (3, 5, 6)), ((3, 4, 5), (5, 6)), ((4, 5), (3, 5, 6))])
def test_half_precision_products_and_gradients_match_torch(shapes, dtype, choices):
    """GGML multiplies a low precision operand only as mul_mat's first; the gradients' products put theirs
    in the other place too (a @ b's gradient for b is a^T @ g): they are computed transposed (ops/products.py's _product)."""
    operands = [_data(*s) for s in shapes]

    def run(lib):
        a, b = (lib.tensor(v).to(getattr(lib, dtype)).requires_grad_() for v in operands)
        y = a @ b
        (y.float() * y.float()).sum().backward()
        return [y.float().detach().numpy(), a.grad.float().numpy(), b.grad.float().numpy()]

    expected = run(torch)
    with execution.forced_lowering(ggrad.device("cpu"), CHOICES[choices]):
        got = run(ggrad)
    tol = 1e-2 if dtype == "float16" else 3e-2
    for g, t in zip(got, expected):
        np.testing.assert_allclose(g, t, rtol=tol, atol=tol * float(np.abs(t).max()))


@pytest.mark.parametrize("choices", ["CUDA", "RPC"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_float16_products_ask_for_float32_sums(monkeypatch, choices, dtype):
    """Every mul_mat of float16 operands, forward and backward, asks for float32 accumulation (as PyTorch's
    products sum; GGML's CUDA and Vulkan would sum them in float16); bfloat16's sum in float32 already."""
    from ggrad.ggml import GTensor, ops
    built, asked = [], []
    real_mul_mat, real_set_prec = ops.mul_mat, GTensor.set_prec

    def mul_mat(ctx, a, b):
        out = real_mul_mat(ctx, a, b)
        built.append((a.dtype.name, out.ptr))
        return out

    def set_prec(node, prec):
        asked.append((node.ptr, prec))
        return real_set_prec(node, prec)
    monkeypatch.setattr(ops, "mul_mat", mul_mat)
    monkeypatch.setattr(GTensor, "set_prec", set_prec)
    with execution.forced_lowering(ggrad.device("cpu"), CHOICES[choices]):
        a = ggrad.tensor(X3).to(getattr(ggrad, dtype)).requires_grad_()
        w = ggrad.tensor(W).to(getattr(ggrad, dtype)).requires_grad_()
        (ggrad.nn.functional.linear(a, w).float() ** 2).sum().backward()
        a.grad.numpy()
    halves = [out for name, out in built if name == "f16"]
    assert len(built) >= 3
    assert [out for out, _ in asked] == halves and all(prec == "f32" for _, prec in asked)
    assert bool(halves) == (dtype == "float16")


@pytest.mark.parametrize("choices", sorted(CHOICES) + ["VULKAN"])
@pytest.mark.parametrize("x_shape", [(5, 4), (3, 5, 4), (2, 3, 5, 4)])
@pytest.mark.parametrize("wanted", ["xwb", "xw", "xb", "wb", "x", "w", "b"])
def test_linear_gradients_in_one_op_match_torch(no_graph_cache, choices, x_shape, wanted):
    """A first-order backward of linear with a bias takes the wanted gradients from one op (LinearGrads:
    x's by the backend's product or out_prod, w's folded over the batch, the bias's leading sums)."""
    from ggrad.autograd import primitive
    x_np, weights = _data(*x_shape), _data(*x_shape[:-1], 6)
    choice = getattr(lowering, choices)
    recorded = []
    original = primitive.Primitive._record.__func__

    def record(cls, ctx, args, tensors):
        recorded.append(cls.__name__)
        return original(cls, ctx, args, tensors)

    with execution.forced_lowering(ggrad.device("cpu"), choice):
        ours = [ggrad.tensor(a, requires_grad=name in wanted) for a, name in ((x_np, "x"), (W, "w"), (B, "b"))]
        y = ggrad.nn.functional.linear(*ours)
        primitive.Primitive._record = classmethod(record)
        try:
            (y * ggrad.tensor(weights)).sum().backward()
        finally:
            primitive.Primitive._record = classmethod(original)
        got = [None if t.grad is None else t.grad.numpy() for t in ours]
    theirs = [torch.tensor(a, requires_grad=name in wanted) for a, name in ((x_np, "x"), (W, "w"), (B, "b"))]
    (torch.nn.functional.linear(*theirs) * torch.tensor(weights)).sum().backward()
    assert recorded.count("LinearGrads") == 1 and not {"MatMulNT", "WeightGrad", "InputGrad", "SumTo"} & set(recorded)
    for mine, t in zip(got, theirs):
        assert (mine is None) == (t.grad is None)
        if t.grad is not None:
            np.testing.assert_allclose(mine, t.grad.numpy(), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("shape, perm", [((3, 4, 5), (1, 2, 0)), ((2, 3, 4, 5), (1, 2, 3, 0)),
                                         ((2, 3, 4, 5), (2, 3, 1, 0)), ((3, 4, 5), (2, 0, 1))])
def test_a_permuted_view_whose_rows_are_strided_times_a_matrix(shape, perm):
    """x.movedim(0, -1) @ w: the view's rows follow one another but their elements are strided; folding its
    batches into one 2-D product must copy it (it read the memory as contiguous rows: wrong values)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((shape[perm[-1]], 3)).astype(np.float32)
    results = []
    for lib in (ggrad, torch):
        xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        out = xt.permute(*perm) @ wt
        (out * out).sum().backward()
        results.append((out.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
