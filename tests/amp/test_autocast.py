"""ggrad.autocast against torch.autocast on the CPU: numerics of the products and their gradients, the
dtypes of the op table, float32 gradients of the master weights, the parameter cast cache."""

import numpy as np
import pytest

import ggrad
from ggrad import nn, optim
from ggrad.amp import TABLE
from ggrad.autograd import autocast_hook
from ggrad.autograd.ops import unary

torch = pytest.importorskip("torch")

DTYPES = {"bf16": (ggrad.bfloat16, torch.bfloat16, 2e-2), "f16": (ggrad.float16, torch.float16, 3e-3)}


@pytest.fixture(params=sorted(DTYPES))
def low(request):
    """(ggrad dtype, torch dtype, relative tolerance): bf16 keeps 8 mantissa bits, f16 11."""
    return DTYPES[request.param]


def _close(got, want, tol, what):
    want = np.asarray(want, dtype=np.float64)
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=tol, atol=tol * scale, err_msg=what)


def _both(arrays):
    """The same float32 leaves in ggrad and torch, requiring grad."""
    g = [ggrad.tensor(a, requires_grad=True) for a in arrays]
    t = [torch.tensor(a, requires_grad=True) for a in arrays]
    return g, t


def _check(g_fn, t_fn, arrays, low, what):
    """Forward and gradients of every input under autocast, ggrad vs torch; dtypes equal to torch's."""
    gdt, tdt, tol = low
    g_in, t_in = _both(arrays)
    with ggrad.autocast("cpu", dtype=gdt):
        g_out = g_fn(*g_in)
    with torch.autocast("cpu", dtype=tdt):
        t_out = t_fn(*t_in)
    assert g_out.dtype.name == {torch.bfloat16: "bf16", torch.float16: "f16"}[t_out.dtype], what
    _close(g_out.float().numpy(), t_out.float().detach().numpy(), tol, f"{what} forward")
    weights = np.random.default_rng(1).standard_normal(g_out.shape).astype(np.float32)
    (g_out.float() * ggrad.tensor(weights)).sum().backward()
    (t_out.float() * torch.tensor(weights)).sum().backward()
    for i, (gx, tx) in enumerate(zip(g_in, t_in)):
        assert gx.grad.dtype is ggrad.float32, f"{what}: gradient {i} is {gx.grad.dtype.name}"
        _close(gx.grad.numpy(), tx.grad.numpy(), 2 * tol, f"{what} gradient {i}")


def _r(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_linear(low):
    rng = np.random.default_rng(0)
    _check(ggrad.linear, torch.nn.functional.linear, [_r(rng, 2, 5, 24), _r(rng, 16, 24), _r(rng, 16)], low,
           "linear")


def test_matmul_batched(low):
    rng = np.random.default_rng(0)
    _check(ggrad.matmul, torch.matmul, [_r(rng, 3, 7, 20), _r(rng, 20, 9)], low, "matmul")
    _check(lambda a, b: a @ b, lambda a, b: a @ b, [_r(rng, 2, 6, 8), _r(rng, 2, 8, 5)], low, "a @ b")


def test_conv1d_conv2d(low):
    rng = np.random.default_rng(0)
    _check(lambda x, w, b: ggrad.conv1d(x, w, b, padding=1), lambda x, w, b: torch.nn.functional.conv1d(
        x, w, b, padding=1), [_r(rng, 2, 3, 11), _r(rng, 4, 3, 3), _r(rng, 4)], low, "conv1d")
    _check(lambda x, w, b: ggrad.conv2d(x, w, b, stride=2), lambda x, w, b: torch.nn.functional.conv2d(
        x, w, b, stride=2), [_r(rng, 2, 3, 9, 9), _r(rng, 5, 3, 3, 3), _r(rng, 5)], low, "conv2d")


def test_grouped_and_transposed_convolutions(low):
    """The public convolutions are hooked, not only the ungrouped path inside them."""
    rng = np.random.default_rng(0)
    F, TF = ggrad.nn.functional, torch.nn.functional
    _check(lambda x, w: F.conv2d(x, w, groups=2), lambda x, w: TF.conv2d(x, w, groups=2),
           [_r(rng, 2, 4, 6, 6), _r(rng, 6, 2, 3, 3)], low, "grouped conv2d")
    _check(lambda x, w: F.conv_transpose2d(x, w, stride=2), lambda x, w: TF.conv_transpose2d(x, w, stride=2),
           [_r(rng, 2, 3, 4, 4), _r(rng, 3, 2, 3, 3)], low, "conv_transpose2d")
    _check(lambda x, w: F.conv_transpose1d(x, w), lambda x, w: TF.conv_transpose1d(x, w),
           [_r(rng, 2, 3, 7), _r(rng, 3, 4, 3)], low, "conv_transpose1d")


def test_scaled_dot_product_attention(low):
    rng = np.random.default_rng(0)
    arrays = [_r(rng, 2, 2, 6, 8), _r(rng, 2, 2, 6, 8), _r(rng, 2, 2, 6, 8)]
    _check(lambda q, k, v: nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
           lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
           arrays, low, "scaled_dot_product_attention")


def test_multihead_attention_output_dtype(low):
    gdt = low[0]
    mha = nn.MultiheadAttention(16, 4, batch_first=True)
    x = ggrad.randn(2, 5, 16)
    with ggrad.autocast("cpu", dtype=gdt):
        out, _ = mha(x, x, x, need_weights=False)
    assert out.dtype is gdt


def test_table_dtypes(low):
    """Products give the autocast dtype; the float32 list gives float32 even for low precision inputs;
    ops outside the table keep their input's dtype."""
    gdt = low[0]
    x = ggrad.randn(4, 6)
    h = x.to(gdt)
    labels = ggrad.tensor(np.array([0, 1, 2, 3], dtype=np.int32))
    with ggrad.autocast("cpu", dtype=gdt):
        assert (x @ x.T).dtype is gdt
        for name, y in [("softmax", ggrad.softmax(h, -1)), ("log_softmax", ggrad.log_softmax(h, -1)),
                        ("layer_norm", ggrad.layer_norm(h, (6,))), ("rms_norm", ggrad.rms_norm(h, (6,))),
                        ("exp", ggrad.exp(h)), ("log", ggrad.log(h.abs() + 1.0)), ("pow", ggrad.pow(h, 2.0)),
                        ("logsumexp", ggrad.logsumexp(h, 1)), ("norm", ggrad.norm(h)),
                        ("cross_entropy", ggrad.cross_entropy(h, labels)), ("mse_loss", ggrad.mse_loss(h, h * 0.5)),
                        ("l1_loss", ggrad.l1_loss(h, h * 0.5))]:
            assert y.dtype is ggrad.float32, f"{name} gave {y.dtype.name}"
        assert ggrad.gelu(h).dtype is gdt and (h + h).dtype is gdt
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            ggrad.binary_cross_entropy(ggrad.sigmoid(h), h * 0.0)


def test_the_hooked_ops_declare_pytorchs_classes():
    """The classes the ops declare (@autocast_op) are PyTorch's CUDA autocast lists, restricted to ggrad's ops,
    and its CPU float32 list for the linear algebra CUDA's lists leave out."""
    lower, f32, banned = autocast_hook.LOWER, autocast_hook.FLOAT32, autocast_hook.BANNED
    expected = {name: (lower, None) for name in ("matmul", "linear", "conv1d", "conv2d", "conv_transpose1d",
                                                  "conv_transpose2d")}
    expected.update({name: (f32, None) for name in (
        "softmax", "log_softmax", "layer_norm", "rms_norm", "norm", "exp", "log", "pow", "logsumexp",
        "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "huber_loss", "smooth_l1_loss",
        "binary_cross_entropy_with_logits", "linalg_inv", "linalg_solve", "linalg_lstsq", "pinverse", "linalg_qr",
        "linalg_svd", "linalg_svdvals", "linalg_eigh", "linalg_eigvalsh", "linalg_matrix_rank", "linalg_cond", "qr",
        "svd")})
    expected.update({"attention": (lower, 3), "self_attention": (lower, 1), "binary_cross_entropy": (banned, None)})
    assert TABLE is autocast_hook.CLASSES and TABLE == expected


def test_float32_list_matches_torch_values():
    """softmax of bf16 scores under autocast: float32 and torch's values (torch's CUDA list; CPU autocast
    keeps softmax in bf16, so the reference is torch's float32 softmax of the same bf16 scores)."""
    rng = np.random.default_rng(0)
    a = _r(rng, 5, 9)
    with ggrad.autocast("cpu"):
        got = ggrad.softmax(ggrad.tensor(a) @ ggrad.tensor(a).T, -1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        scores = torch.tensor(a) @ torch.tensor(a).T
    want = torch.softmax(scores.float(), -1)
    assert got.dtype is ggrad.float32
    _close(got.numpy(), want.numpy(), 1e-5, "softmax")


def test_master_weights_get_float32_gradients(low):
    gdt = low[0]
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))
    x = ggrad.randn(4, 8)
    y = ggrad.tensor(np.array([0, 1, 2, 1], dtype=np.int32))
    with ggrad.autocast("cpu", dtype=gdt):
        loss = ggrad.cross_entropy(model(x), y)
    assert loss.dtype is ggrad.float32
    loss.backward()
    for name, p in model.named_parameters():
        assert p.dtype is ggrad.float32 and p.grad.dtype is ggrad.float32, name
        assert np.isfinite(p.grad.numpy()).all() and np.abs(p.grad.numpy()).sum() > 0, name


def _count_casts(monkeypatch):
    calls = []
    real = unary.Cast.apply

    def counting(x, dtype):
        calls.append((x.shape, dtype))
        return real(x, dtype)
    monkeypatch.setattr(unary.Cast, "apply", counting)
    return calls


def test_one_cast_per_weight_per_region(monkeypatch):
    lin = nn.Linear(8, 8, bias=False)
    x = ggrad.randn(2, 8)
    calls = _count_casts(monkeypatch)
    with ggrad.autocast("cpu"):
        y = lin(lin(lin(x).float()).float())
    weight_casts = [c for c in calls if c == ((8, 8), ggrad.bfloat16)]
    assert len(weight_casts) == 1
    calls.clear()
    with ggrad.autocast("cpu", cache_enabled=False):
        lin(lin(x).float())
    assert len([c for c in calls if c == ((8, 8), ggrad.bfloat16)]) == 2
    assert y.dtype is ggrad.bfloat16


def test_cached_cast_redone_after_an_update():
    """An optimizer step inside one region changes the weight: the next product sees the new value."""
    lin = nn.Linear(4, 4, bias=False)
    opt = optim.SGD(lin.parameters(), lr=0.5)
    x = ggrad.randn(3, 4)
    with ggrad.autocast("cpu"):
        first = lin(x).float().numpy()
        lin(x).float().sum().backward()
        opt.step()
        second = lin(x).float().numpy()
    want = x.numpy() @ lin.weight.numpy().T
    _close(second, want, 3e-2, "after the step")
    assert not np.allclose(first, second)


def test_backward_inside_the_region_and_device_type():
    lin = nn.Linear(4, 3)
    x = ggrad.randn(2, 4)
    with ggrad.autocast("cpu", dtype=ggrad.float16):
        out = lin(x)
        out.float().sum().backward()
    assert lin.weight.grad.dtype is ggrad.float32
    with ggrad.autocast("cuda"):   # another device type: CPU tensors run as written
        assert lin(x).dtype is ggrad.float32


def test_enabled_nested_and_decorator():
    w = ggrad.randn(3, 3)

    @ggrad.autocast("cpu", dtype=ggrad.float16)
    def product(a):
        return a @ a

    assert product(w).dtype is ggrad.float16
    with ggrad.amp.autocast("cpu"):
        assert ggrad.amp.is_autocast_enabled("cpu") and ggrad.amp.get_autocast_dtype("cpu") is ggrad.bfloat16
        with ggrad.autocast("cpu", enabled=False):
            assert (w @ w).dtype is ggrad.float32
        with ggrad.autocast("cpu", dtype=ggrad.float16):
            assert (w @ w).dtype is ggrad.float16
        assert (w @ w).dtype is ggrad.bfloat16
    assert (w @ w).dtype is ggrad.float32 and not ggrad.amp.is_autocast_enabled()
    with pytest.raises(RuntimeError, match="float16 or ggrad.bfloat16"):
        ggrad.autocast("cpu", dtype=ggrad.float32)


def test_low_precision_products_without_autocast():
    """f16 @ f16 gives f16 and bf16 @ bf16 bf16, as in PyTorch (the product accumulates in f32)."""
    rng = np.random.default_rng(0)
    a, b = _r(rng, 4, 64), _r(rng, 64, 5)
    for gdt, tdt in ((ggrad.float16, torch.float16), (ggrad.bfloat16, torch.bfloat16)):
        got = ggrad.tensor(a).to(gdt) @ ggrad.tensor(b).to(gdt)
        want = (torch.tensor(a).to(tdt).double() @ torch.tensor(b).to(tdt).double()).to(tdt)
        assert got.dtype is gdt
        _close(got.float().numpy(), want.float().numpy(), 1e-2, gdt.name)
