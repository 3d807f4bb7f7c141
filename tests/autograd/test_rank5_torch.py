"""Tensors of more than 4 dimensions (GGML's limit, folded: ggrad/autograd/folding.py) against PyTorch:
forward values and the gradients of every input, for the shapes PyTorch code uses (ViT patchify, GQA
expand, 5-D and 6-D broadcasting, reductions and softmax over each dim, stack, permutes, slices, matmul)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import ggrad  # noqa: E402

B, C, H, W, P = 2, 3, 4, 6, 2


def _patchify(T, x):
    return x.view(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5).reshape(B, (H // P) * (W // P), C * P * P)


def _unpatchify(T, x):
    return x.reshape(B, H // P, W // P, C, P, P).permute(0, 3, 1, 4, 2, 5).reshape(B, C, H, W)


CASES = [
    ("patchify", _patchify, [(B, C, H, W)]),
    ("unpatchify", _unpatchify, [(B, (H // P) * (W // P), C * P * P)]),
    ("patchify roundtrip", lambda T, x: _unpatchify(T, _patchify(T, x)) * x, [(B, C, H, W)]),
    ("gqa expand", lambda T, k: k[:, :, None, :, :].expand(2, 2, 3, 5, 4).reshape(2, 6, 5, 4), [(2, 2, 5, 4)]),
    ("5-D broadcast", lambda T, a, b: a * b + a, [(2, 3, 4, 5, 6), (3, 1, 5, 1)]),
    ("5-D broadcast both", lambda T, a, b: a - b, [(2, 1, 4, 1, 6), (1, 3, 1, 5, 1)]),
    ("6-D broadcast", lambda T, a, b: (a - b).exp(), [(2, 3, 2, 4, 5, 3), (2, 1, 1, 4, 1, 3)]),
    ("6-D same shape", lambda T, a, b: a * b.tanh(), [(2, 3, 2, 4, 5, 3), (2, 3, 2, 4, 5, 3)]),
    ("5-D channel bias", lambda T, x, b: x + b.view(1, -1, 1, 1, 1), [(2, 3, 4, 5, 6), (3,)]),
    ("sum all", lambda T, x: x.sum(), [(2, 3, 4, 5, 6)]),
    ("sum dims", lambda T, x: x.sum((1, 3)), [(2, 3, 4, 5, 6)]),
    ("mean dims keepdim", lambda T, x: x.mean((0, 2, 4), keepdim=True), [(2, 3, 4, 5, 6)]),
    ("stack dim 2", lambda T, a, b: T.stack([a, b], 2), [(2, 3, 4, 5), (2, 3, 4, 5)]),
    ("stack dim -1", lambda T, a, b, c: T.stack([a, b, c], -1), [(2, 3, 4, 5)] * 3),
    ("unsqueeze squeeze", lambda T, x: x.unsqueeze(2).squeeze(2) * 2, [(2, 3, 4, 5)]),
    ("unsqueeze", lambda T, x: x.unsqueeze(1) * x.unsqueeze(0), [(2, 3, 4, 5)]),
    ("permute 5", lambda T, x: x.permute(4, 2, 0, 3, 1), [(2, 3, 4, 5, 6)]),
    ("permute 5 grouped", lambda T, x: x.permute(3, 4, 0, 1, 2), [(2, 3, 4, 5, 6)]),
    ("permute 6", lambda T, x: x.permute(5, 3, 1, 4, 2, 0), [(2, 3, 2, 3, 2, 3)]),
    ("transpose", lambda T, x: x.transpose(1, 3), [(2, 3, 4, 5, 6)]),
    ("transpose last two", lambda T, x: x.transpose(-1, -2).contiguous(), [(2, 3, 4, 5, 6)]),
    ("slice with step", lambda T, x: x[:, 1:, ..., ::2], [(2, 3, 4, 5, 6)]),
    ("slice every dim", lambda T, x: x[1:, 1:, 1:3, 2:, 1:5], [(2, 3, 4, 5, 6)]),
    ("select", lambda T, x: x[:, 1].unsqueeze(1) + x[:, :, 2].unsqueeze(2), [(2, 3, 4, 5, 6)]),
    ("matmul", lambda T, a, b: a @ b, [(2, 2, 3, 4, 5), (2, 2, 3, 5, 6)]),
    ("matmul broadcast", lambda T, a, b: a @ b, [(2, 1, 3, 4, 5), (2, 3, 5, 6)]),
    ("cat", lambda T, a, b: T.cat([a, b], 3), [(2, 3, 4, 5, 6), (2, 3, 4, 2, 6)]),
    ("flatten", lambda T, x: x.flatten(1, 3), [(2, 3, 4, 5, 6)]),
    ("unary chain", lambda T, x: (x * x + 1).sqrt() + x.sigmoid() * T.relu(x), [(2, 3, 4, 5, 6)]),
]
for d in range(5):
    CASES += [
        (f"sum dim {d}", lambda T, x, d=d: x.sum(d), [(2, 3, 4, 5, 6)]),
        (f"mean dim {d}", lambda T, x, d=d: x.mean(d, keepdim=True), [(2, 3, 4, 5, 6)]),
        (f"amax dim {d}", lambda T, x, d=d: x.amax(d), [(2, 3, 4, 5, 6)]),
        (f"softmax dim {d}", lambda T, x, d=d: T.softmax(x, d), [(2, 3, 4, 5, 6)]),
    ]


def _run(fn, shapes, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    results = []
    for T in (torch, ggrad):
        xs = [T.tensor(a, requires_grad=True) for a in arrays]
        out = fn(T, *xs)
        weight = np.random.default_rng(seed + 1).standard_normal(tuple(out.shape)).astype(np.float32)
        (out * T.tensor(weight)).sum().backward()
        results.append((tuple(out.shape), np.asarray(out.detach().numpy()),
                        [np.asarray(x.grad.numpy()) for x in xs]))
    return results


@pytest.mark.parametrize("name, fn, shapes", CASES, ids=[c[0] for c in CASES])
def test_rank5_matches_torch(name, fn, shapes):
    (t_shape, t_out, t_grads), (g_shape, g_out, g_grads) = _run(fn, shapes)
    assert g_shape == t_shape
    np.testing.assert_allclose(g_out, t_out, rtol=1e-4, atol=1e-5)
    for g, t in zip(g_grads, t_grads):
        np.testing.assert_allclose(g, t, rtol=1e-4, atol=1e-5)


def test_writes_through_5d_views_match_torch():
    a = np.arange(2 * 3 * 4 * 5 * 6, dtype=np.float32).reshape(2, 3, 4, 5, 6)
    g, t = ggrad.tensor(a.copy()), torch.tensor(a.copy())
    for T, x in ((ggrad, g), (torch, t)):
        x[:, 1:, 2] = 0.5
        x.permute(4, 3, 2, 1, 0).mul_(2)
        x[..., ::2] += 1
    np.testing.assert_array_equal(g.numpy(), t.numpy())


def test_5d_tensor_reads_and_factories():
    a = np.random.default_rng(0).standard_normal((2, 1, 3, 2, 2, 2)).astype(np.float32)
    x = ggrad.tensor(a)
    assert x.shape == a.shape and x.ndim == 6
    np.testing.assert_array_equal(x.numpy(), a)
    assert ggrad.zeros(2, 3, 4, 5, 6).sum().item() == 0.0
    assert x.tolist() == a.tolist()


def test_write_into_unfoldable_5d_slice_is_a_runtime_error():
    x = ggrad.zeros(2, 3, 4, 5, 6)
    with pytest.raises(RuntimeError, match=r"slice_scatter: .*\(1, 2, 3, 4, 5\) into \(2, 3, 4, 5, 6\)"):
        x[1:, 1:, 1:, 1:, 1:] = 1.0


def test_code_of_at_most_4_dims_never_reaches_folding(monkeypatch):
    from ggrad.autograd.ops import folding

    def refuse(*args):
        raise AssertionError("a <=4-D op went through folding.py")
    for name in ("permute", "expand", "broadcast_apply", "slice_", "slice_scatter", "sum_to", "cat", "matmul"):
        monkeypatch.setattr(folding, name, refuse)
    ggrad.manual_seed(0)
    block = ggrad.nn.TransformerBlock(16, 4)
    x = ggrad.randn(2, 5, 16, requires_grad=True)
    loss = (block(x)[:, 1:, ::2].softmax(-1) * x.sum(0, keepdim=True)[:, 1:, ::2]).mean()
    loss.backward()
    assert x.grad.shape == x.shape and np.isfinite(x.grad.numpy()).all()


MORE_CASES = [
    ("roll", lambda T, x: T.roll(x, (1, -2), (1, 4)), [(2, 3, 4, 5, 6)]),
    ("repeat", lambda T, x: x.repeat(1, 2, 1, 1, 2), [(2, 3, 4, 5, 6)]),
    ("repeat new dims", lambda T, x: x.repeat(2, 1, 1, 2, 1), [(3, 4, 5, 6)]),
    ("cumprod", lambda T, x: T.cumprod(x, 2), [(2, 3, 4, 5, 6)]),
    ("cumsum", lambda T, x: T.cumsum(x, 1), [(2, 3, 4, 5, 6)]),
    ("split", lambda T, x: T.split(x, 2, 1)[1] * T.split(x, [1, 2], 1)[0], [(2, 3, 4, 5, 6)]),
    ("chunk", lambda T, x: x.chunk(2, 4)[1], [(2, 3, 4, 5, 6)]),
    ("flip", lambda T, x: T.flip(x, [1, 3]), [(2, 3, 4, 5, 6)]),
    ("var", lambda T, x: x.var(1), [(2, 3, 4, 5, 6)]),
    ("max dim", lambda T, x: x.max(2)[0], [(2, 3, 4, 5, 6)]),
    ("log_softmax", lambda T, x: T.log_softmax(x, 1), [(2, 3, 4, 5, 6)]),
    ("layer_norm", lambda T, x: T.nn.functional.layer_norm(x, (6,)), [(2, 3, 4, 5, 6)]),
    ("where", lambda T, x: T.where(x > 0, x, x * 2), [(2, 3, 4, 5, 6)]),
    ("index list", lambda T, x: x[:, [0, 2]], [(2, 3, 4, 5, 6)]),
]


@pytest.mark.parametrize("name, fn, shapes", MORE_CASES, ids=[c[0] for c in MORE_CASES])
def test_rank5_ops_along_a_dim_match_torch(name, fn, shapes):
    test_rank5_matches_torch(name, fn, shapes)


def test_one_hot_of_a_4d_index_is_5d():
    idx = np.random.default_rng(0).integers(0, 3, (2, 3, 2, 2))
    got = ggrad.nn.functional.one_hot(ggrad.tensor(idx), 3)
    np.testing.assert_array_equal(got.numpy(), torch.nn.functional.one_hot(torch.tensor(idx), 3).numpy())
