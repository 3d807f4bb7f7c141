"""PyTorch's convenience ops built from ggrad primitives (ops/torch_composites.py): values and gradients
against PyTorch, the Tensor-method spelling, and PyTorch's rank checks."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import ggrad  # noqa: E402

RNG = np.random.default_rng(0)


def _arr(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# name -> (inputs as arrays, call given the namespace and the input tensors)
CASES = {
    "mm": ([_arr(3, 4), _arr(4, 2)], lambda T, a, b: T.mm(a, b)),
    "bmm": ([_arr(2, 3, 4), _arr(2, 4, 5)], lambda T, a, b: T.bmm(a, b)),
    "mv": ([_arr(3, 4), _arr(4)], lambda T, a, b: T.mv(a, b)),
    "dot": ([_arr(5), _arr(5)], lambda T, a, b: T.dot(a, b)),
    "outer": ([_arr(3), _arr(4)], lambda T, a, b: T.outer(a, b)),
    "ger_method": ([_arr(3), _arr(2)], lambda T, a, b: a.ger(b)),
    "addmm": ([_arr(3, 2), _arr(3, 4), _arr(4, 2)], lambda T, c, a, b: T.addmm(c, a, b, beta=0.5, alpha=2.0)),
    "baddbmm": ([_arr(2, 3, 5), _arr(2, 3, 4), _arr(2, 4, 5)],
                lambda T, c, a, b: T.baddbmm(c, a, b, beta=0.5, alpha=-1.0)),
    "swapaxes": ([_arr(2, 3, 4)], lambda T, a: T.swapaxes(a, 0, 2)),
    "swapdims_method": ([_arr(2, 3, 4)], lambda T, a: a.swapdims(-1, 1)),
    "movedim": ([_arr(2, 3, 4, 5)], lambda T, a: T.movedim(a, 1, -1)),
    "movedim_many": ([_arr(2, 3, 4, 5)], lambda T, a: T.movedim(a, (0, 3), (2, 0))),
    "view_as": ([_arr(2, 6), _arr(3, 4)], lambda T, a, b: a.view_as(b) * b),
    "reshape_as": ([_arr(2, 6), _arr(4, 3)], lambda T, a, b: a.reshape_as(b) + b),
    "expand_as": ([_arr(3, 1), _arr(3, 4)], lambda T, a, b: a.expand_as(b) * b),
    "broadcast_to": ([_arr(1, 4)], lambda T, a: T.broadcast_to(a, (3, 4)) * 2),
    "clamp_min": ([_arr(3, 4)], lambda T, a: T.clamp_min(a, 0.1)),
    "clamp_max_method": ([_arr(3, 4)], lambda T, a: a.clamp_max(-0.2)),
    "negative": ([_arr(3)], lambda T, a: T.negative(a)),
    "true_divide": ([_arr(3), _arr(3)], lambda T, a, b: T.true_divide(a, b * b + 1)),
    "rsub": ([_arr(3), _arr(3)], lambda T, a, b: T.rsub(a, b, alpha=2)),
    "lerp": ([_arr(3, 4), _arr(3, 4), _arr(4)], lambda T, a, b, w: T.lerp(a, b, w)),
    "lerp_scalar_method": ([_arr(3, 4), _arr(3, 4)], lambda T, a, b: a.lerp(b, 0.25)),
    "addcmul": ([_arr(3), _arr(3), _arr(3)], lambda T, a, b, c: T.addcmul(a, b, c, value=0.5)),
    "addcdiv": ([_arr(3), _arr(3), _arr(3)], lambda T, a, b, c: T.addcdiv(a, b, c * c + 1, value=-2)),
    "prod_dim": ([np.array([[1, 0, 3], [2, -1, 4], [0, 0, 5]], np.float32)], lambda T, a: T.prod(a, dim=-1)),
    "prod_keepdim_method": ([_arr(3, 4)], lambda T, a: a.prod(0, keepdim=True)),
    "prod_all": ([_arr(2, 3)], lambda T, a: T.prod(a)),
    "prod_all_with_a_zero": ([np.array([[1, 2], [0, 3]], np.float32)], lambda T, a: a.prod()),
    "prod_empty_dim": ([_arr(2, 0)], lambda T, a: a.prod(1)),
    "prod_of_a_scalar": ([np.float32(3.0)], lambda T, a: T.prod(a, 0)),
    "unflatten": ([_arr(2, 12)], lambda T, a: T.unflatten(a, 1, (3, -1))),
    "unflatten_method": ([_arr(6, 2)], lambda T, a: a.unflatten(0, (2, 3))),
    "tile_short_dims": ([_arr(2, 3)], lambda T, a: T.tile(a, (2,))),
    "tile_method": ([_arr(2, 3)], lambda T, a: a.tile((2, 1, 2))),
    "diff": ([_arr(3, 5)], lambda T, a: T.diff(a)),
    "diff_n2_dim0": ([_arr(4, 3)], lambda T, a: a.diff(n=2, dim=0)),
    "hstack": ([_arr(2, 3), _arr(2, 1)], lambda T, a, b: T.hstack([a, b])),
    "hstack_1d": ([_arr(3), _arr(2)], lambda T, a, b: T.hstack((a, b))),
    "vstack_1d": ([_arr(3), _arr(3)], lambda T, a, b: T.vstack([a, b])),
    "logaddexp": ([_arr(3, 4) * 30, _arr(3, 4) * 30], lambda T, a, b: T.logaddexp(a, b)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_value_and_gradients_match_pytorch(name):
    arrays, call = CASES[name]
    ref_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    our_in = [ggrad.tensor(a, requires_grad=True) for a in arrays]
    ref, ours = call(torch, *ref_in), call(ggrad, *our_in)
    assert tuple(ours.shape) == tuple(ref.shape)
    np.testing.assert_allclose(ours.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    weight = _arr(*ref.shape)
    (ref * torch.tensor(weight)).sum().backward()
    (ours * ggrad.tensor(weight)).sum().backward()
    for i, (r, o) in enumerate(zip(ref_in, our_in)):
        np.testing.assert_allclose(o.grad.numpy(), r.grad.numpy(), rtol=1e-5, atol=1e-5, err_msg=f"input {i}")


def test_prod_of_integers_is_int64_as_pytorch():
    got = ggrad.prod(ggrad.tensor([[2, 3], [4, 5]]), dim=1)
    assert got.dtype == ggrad.int64 and got.tolist() == [6, 20]


def test_type_as_takes_the_other_dtype():
    x = ggrad.tensor([1, 2])
    assert x.type_as(ggrad.ones(1)).dtype == ggrad.float32
    assert ggrad.ones(2).type_as(x).dtype == ggrad.int64


@pytest.mark.parametrize("call, message", [
    (lambda T: T.mm(T.ones(2, 3, 4), T.ones(4, 2)), "mm: input must be 2-D"),
    (lambda T: T.bmm(T.ones(2, 3, 4), T.ones(3, 4, 5)), "bmm: batch sizes differ"),
    (lambda T: T.mv(T.ones(2, 3), T.ones(3, 1)), "mv: vec must be 1-D"),
    (lambda T: T.dot(T.ones(3), T.ones(4)), "dot: both vectors need the same length"),
    (lambda T: T.outer(T.ones(3, 1), T.ones(4)), "outer: input must be 1-D"),
])
def test_rank_and_shape_errors_raise_as_pytorch(call, message):
    with pytest.raises(RuntimeError):
        call(torch)
    with pytest.raises(ValueError, match=message):  # ggrad's ShapeError is a ValueError
        call(ggrad)


def test_movedim_rejects_mismatched_and_repeated_dims():
    x = ggrad.ones(2, 3, 4)
    with pytest.raises(ValueError, match="differ in length"):
        ggrad.movedim(x, (0, 1), 2)
    with pytest.raises(ValueError, match="repeated dimension"):
        ggrad.movedim(x, (0, 0), (1, 2))


INF = float("inf")


def test_logaddexp_and_logcumsumexp_at_the_edges_as_pytorch():
    """Infinite and far-apart operands: the exact max, equal infinities, prefixes far below the row's max."""
    a = np.array([-INF, INF, 1.0, np.nan, -200.0, 2.0], np.float32)
    b = np.array([-INF, INF, INF, 1.0, 0.0, 2.0], np.float32)
    np.testing.assert_allclose(ggrad.logaddexp(ggrad.tensor(a), ggrad.tensor(b)).numpy(),
                               torch.logaddexp(torch.tensor(a), torch.tensor(b)).numpy(), rtol=1e-6)
    rows = np.array([[-200.0, 0.0, -INF, 3.0], [-INF] * 4, [1.0, 2.0, 3.0, 4.0]], np.float32)
    np.testing.assert_allclose(ggrad.logcumsumexp(ggrad.tensor(rows), 1).numpy(),
                               torch.logcumsumexp(torch.tensor(rows), 1).numpy(), rtol=1e-6)
    finite = rows[[0, 2]]
    x, t = ggrad.tensor(finite, requires_grad=True), torch.tensor(finite, requires_grad=True)
    ggrad.logcumsumexp(x, 1).sum().backward()
    torch.logcumsumexp(t, 1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["addmm", "baddbmm"])
def test_beta_zero_ignores_input_as_pytorch(name):
    """beta=0: `input`'s nan and inf do not reach the result (PyTorch documents it)."""
    batch = (2,) if name == "baddbmm" else ()
    c = np.full(batch + (2, 2), np.nan, np.float32)
    c[..., 0, 0] = INF
    a, b = _arr(*batch, 2, 3), _arr(*batch, 3, 2)
    ours = getattr(ggrad, name)(ggrad.tensor(c), ggrad.tensor(a), ggrad.tensor(b), beta=0, alpha=2.0)
    theirs = getattr(torch, name)(torch.tensor(c), torch.tensor(a), torch.tensor(b), beta=0, alpha=2.0)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5)


INDEXED = {
    "index_fill": lambda T, x: x.index_fill(1, T.tensor([0, -1]), -1.0),
    "index_fill_tensor_value": lambda T, x: T.index_fill(x, 0, T.tensor([1]), T.tensor(2.5)),
    "index_copy_rows": lambda T, x: x.index_copy(0, T.tensor([1]), T.ones(1, 3) * 7),
    "index_copy_columns": lambda T, x: x.index_copy(1, T.tensor([2, 0]), T.tensor([[5.0, 8.0], [6.0, 9.0]])),
    "diag_of_matrix": lambda T, x: (T.diag(x), T.diag(x, 1), T.diag(x, -1)),
    "diag_from_vector": lambda T, x: (T.diag(x[0]), T.diag(x[1], -2)),
    "meshgrid_ij": lambda T, x: T.meshgrid(T.arange(2.0), T.arange(3.0), x[0], indexing="ij"),
    "meshgrid_xy": lambda T, x: T.meshgrid(x[0], x[1, :2], indexing="xy"),
}


@pytest.mark.parametrize("name", sorted(INDEXED))
def test_index_fill_copy_diag_meshgrid_match_torch(name):
    results = []
    for T in (torch, ggrad):
        x = T.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 4 - 0.5, requires_grad=True)
        out = INDEXED[name](T, x)
        outs = out if isinstance(out, tuple) else (out,)
        loss = sum((o.float() * (T.arange(o.numel()).float().reshape(tuple(o.shape)) + 1)).sum() for o in outs
                   if o.dtype in (T.float32,) and o.requires_grad)
        if hasattr(loss, "backward"):
            loss.backward()
        results.append(([o.detach().numpy() for o in outs], None if x.grad is None else x.grad.numpy()))
    (theirs, tg), (ours, og) = results
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert (og is None) == (tg is None)
    if tg is not None:
        np.testing.assert_allclose(og, tg, rtol=1e-6)


@pytest.mark.parametrize("op", ["index_fill", "index_copy"])
def test_index_fill_and_copy_of_integers_leave_the_input_as_torch(op):
    """Out of place on every dtype: an int64 input keeps its values (the result was the input itself)."""
    results = []
    for T in (torch, ggrad):
        x = T.tensor([[1, 2, 3], [4, 5, 6]])
        out = (T.index_fill(x, 0, T.tensor([1]), 9) if op == "index_fill"
               else T.index_copy(x, 1, T.tensor([2]), T.tensor([[7], [8]])))
        results.append((x.numpy().copy(), out.numpy()))
    (tx, tout), (gx, gout) = results
    np.testing.assert_array_equal(gx, tx)
    np.testing.assert_array_equal(gout, tout)
    assert gout.dtype == tout.dtype


def test_where_alone_and_masked_select_as_torch():
    out = []
    for T in (torch, ggrad):
        x = T.tensor([[0.0, 1.0], [2.0, 0.0]])
        out.append(([t.tolist() for t in T.where(x > 0)], T.masked_select(x, x > 0).tolist(),
                    T.masked_select(x, T.tensor([True, False])).tolist()))
        with pytest.raises(TypeError):
            T.where(x > 0, x)
    assert out[0] == out[1]
