"""Autocast under the GPU backends' lowering choices, run on the CPU: the same gradients as the CPU's
choices, and no op that CUDA or Vulkan lack (out_prod of a non-f32 operand; cross_entropy on Vulkan)."""

import numpy as np
import pytest

import ggrad
from ggrad import ggml
from ggrad.autograd import execution, lowering
from ggrad.examples.char_gpt import CharGPT

DTYPES = {"f16": ggrad.float16, "bf16": ggrad.bfloat16}


def _gradients(dtype):
    ggrad.manual_seed(0)
    model = CharGPT(32, 32, 2, 2, 16)
    rng = np.random.default_rng(0)
    x = ggrad.tensor(rng.integers(0, 32, (4, 16)).astype(np.int32))
    y = ggrad.tensor(rng.integers(0, 32, 64).astype(np.int32))
    with ggrad.autocast("cpu", dtype=dtype):
        loss = ggrad.cross_entropy(model(x).reshape(-1, 32), y)
    loss.backward()
    return [loss.item()] + [p.grad.numpy() for p in model.parameters()]


@pytest.mark.parametrize("backend", ["CUDA", "CUDA_TWINS", "VULKAN"])
@pytest.mark.parametrize("name", sorted(DTYPES))
def test_gpu_lowering_of_an_autocast_step(monkeypatch, backend, name):
    built = []
    real_out_prod, real_ce, real_half = ggml.ops.out_prod, ggml.ops.cross_entropy_loss, ggml.kernels.matmul_half

    def matmul_half(ctx, a, b, bias=None, rounded=False):
        built.append(("matmul_half", a.dtype.name, b.dtype.name))
        return real_half(ctx, a, b, bias, rounded)
    monkeypatch.setattr(ggml.kernels, "matmul_half", matmul_half)

    def out_prod(ctx, a, b):
        built.append(("out_prod", a.dtype.name, b.dtype.name))
        return real_out_prod(ctx, a, b)

    def cross_entropy_loss(ctx, a, b):
        built.append(("cross_entropy_loss",))
        return real_ce(ctx, a, b)
    monkeypatch.setattr(ggml.ops, "out_prod", out_prod)
    monkeypatch.setattr(ggml.ops, "cross_entropy_loss", cross_entropy_loss)
    want = _gradients(DTYPES[name])
    built.clear()
    with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, backend)):
        got = _gradients(DTYPES[name])
    assert all(op[1:] == ("f32", "f32") for op in built if op[0] == "out_prod"), built
    # CUDA's twins take every product of the blocks' half operands, forward and both gradients (6 a block)
    halves = [op for op in built if op[0] == "matmul_half"]
    assert len(halves) >= (12 if backend == "CUDA_TWINS" else 0) and (halves == [] or backend == "CUDA_TWINS")
    if backend == "VULKAN":
        assert ("cross_entropy_loss",) not in built
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=2e-2, atol=2e-2 * max(1e-3, float(np.abs(w).max())),
                                   err_msg=f"item {i}")


@pytest.mark.parametrize("backend", ["CPU", "CUDA", "CUDA_TWINS", "VULKAN"])
def test_products_keep_their_low_precision_rows(backend):
    """A product of a float32 activation keeps the float16 rows it multiplied (for the weight gradient), as
    PyTorch does, not their float32 source: half the bytes held from forward to backward under every
    lowering (CUDA's float32 out_prod casts them back in the backward). The gradients are checked above."""
    ggrad.manual_seed(0)
    w = ggrad.nn.Parameter(ggrad.randn(8, 16))
    x = ggrad.randn(4, 16, requires_grad=True)
    with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, backend)):
        with ggrad.autocast("cpu", dtype=ggrad.float16):
            y = ggrad.linear(x * 2.0, w)
        product = y.grad_fn   # the product's rounded result is its own second output
        assert product.name.startswith("LowPrecisionProduct")
        rows, weight = product.ctx.saved_tensors
        assert rows.dtype is ggrad.float16
        # CUDA's x gradient reads the float32 master weight by out_prod (products._master_weight); with ggrad's
        # twins it multiplies the low precision weight
        assert weight.dtype is (ggrad.float32 if backend == "CUDA" else ggrad.float16)
        y.float().sum().backward()
    assert x.grad.dtype is ggrad.float32 and w.grad.dtype is ggrad.float32


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_cuda_input_gradient_reads_the_master_weight_in_place(name):
    """Under CUDA's choices an autocast linear's backward takes both gradients from out_prod (float32, read in
    place: no transposed copy of the low precision weight; TF32 tensor cores on the device); the x gradient
    equals g @ w of the float32 master weight (g rounded, as the gradient of the rounded result), and agrees with the CPU's low precision product."""
    rng = np.random.default_rng(0)
    w_np = rng.standard_normal((24, 40)).astype(np.float32)
    x_np = rng.standard_normal((6, 40)).astype(np.float32)
    g_np = rng.standard_normal((6, 24)).astype(np.float32)

    def run(backend):
        w = ggrad.nn.Parameter(ggrad.tensor(w_np))
        x = ggrad.tensor(x_np, requires_grad=True)
        with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, backend)):
            with ggrad.autocast("cpu", dtype=DTYPES[name]):
                y = ggrad.linear(x * 1.0, w)
            with ggrad.profile() as prof:
                (y.float() * ggrad.tensor(g_np)).sum().backward()
                ggrad.realize()
        return x.grad.numpy(), w.grad.numpy(), {op: n for op, (n, _) in prof.by_op().items()}

    gx, gw, ops_cuda = run("CUDA")
    # one graph: the forward's low precision product, then the two gradients
    assert ops_cuda.get("CONT", 0) == 0 and ops_cuda.get("MUL_MAT", 0) == 1, ops_cuda
    assert ops_cuda.get("OUT_PROD", 0) == 2, ops_cuda
    # the gradient of the rounded result arrives rounded (the gradient of a low precision tensor)
    g_low = ggrad.tensor(g_np).to(DTYPES[name]).float().numpy()
    np.testing.assert_allclose(gx, g_low @ w_np, rtol=1e-5, atol=1e-5)
    gx_cpu, gw_cpu, _ = run("CPU")
    tol = 1e-2 if name == "f16" else 4e-2
    np.testing.assert_allclose(gx, gx_cpu, rtol=tol, atol=tol * np.abs(gx_cpu).max())
    np.testing.assert_allclose(gw, gw_cpu, rtol=tol, atol=tol * np.abs(gw_cpu).max())


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_cuda_twins_take_both_gradients_from_half_operands(name):
    """Under CUDA's choices with ggrad's twins, an autocast linear is three half products summing in float32
    (kernels.matmul_half): the forward, g @ w_low and g^T @ x_low, with g rounded once to the operands'
    dtype (as PyTorch's gradient of a half result); no out_prod, no mul_mat, no transposed copy."""
    rng = np.random.default_rng(0)
    w_np = rng.standard_normal((24, 40)).astype(np.float32)
    x_np = rng.standard_normal((6, 40)).astype(np.float32)
    g_np = rng.standard_normal((6, 24)).astype(np.float32)
    dtype = DTYPES[name]
    w = ggrad.nn.Parameter(ggrad.tensor(w_np))
    x = ggrad.tensor(x_np, requires_grad=True)
    with execution.forced_lowering(ggrad.device("cpu"), lowering.CUDA_TWINS):
        with ggrad.autocast("cpu", dtype=dtype):
            y = ggrad.linear(x * 1.0, w)
        with ggrad.profile() as prof:
            (y.float() * ggrad.tensor(g_np)).sum().backward()
            ggrad.realize()
    ops_run = {op: n for op, (n, _) in prof.by_op().items()}
    assert ops_run.get("MATMUL_HALF", 0) == 3, ops_run
    assert not {"OUT_PROD", "MUL_MAT", "CONT"} & set(ops_run), ops_run

    def low(a):
        return ggrad.tensor(a).to(dtype).float().numpy().astype(np.float64)
    np.testing.assert_allclose(x.grad.numpy(), low(g_np) @ low(w_np), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(w.grad.numpy(), low(g_np).T @ low(x_np), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(y.float().numpy(), low(low(x_np) @ low(w_np).T), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("backend", ["CPU", "CUDA", "CUDA_TWINS"])
def test_autocast_products_have_second_derivatives_as_torch(backend):
    """A gradient penalty recorded with create_graph through an autocast linear gives PyTorch's second
    derivatives (float32 reference, float16 tolerances). The saved low precision copies keep their history
    (the casts) back to the sources; CUDA's x gradient (InputGrad, from the float32 master weight) has its
    own backward. Before the copies kept their history, the weight's second derivative was off by ~34%."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    w_np = rng.standard_normal((12, 20)).astype(np.float32) * 0.3
    x_np = rng.standard_normal((5, 20)).astype(np.float32)
    wt, xt = torch.tensor(w_np, requires_grad=True), torch.tensor(x_np, requires_grad=True)
    gxt, = torch.autograd.grad((xt @ wt.T).square().sum(), xt, create_graph=True)
    gxt.square().sum().backward()

    w = ggrad.nn.Parameter(ggrad.tensor(w_np))
    x = ggrad.tensor(x_np, requires_grad=True)
    with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, backend)):
        with ggrad.autocast("cpu", dtype=ggrad.float16):
            y = ggrad.linear(x * 1.0, w)
        gx, = ggrad.autograd.grad(y.float().square().sum(), x, create_graph=True)
        gx.square().sum().backward()
        ggrad.realize()
    for got, want in ((gx, gxt), (w.grad, wt.grad), (x.grad, xt.grad)):
        want = want.detach().numpy()
        np.testing.assert_allclose(got.numpy(), want, rtol=5e-3, atol=5e-3 * float(np.abs(want).max()))


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_twins_write_an_autocast_linear_rounded_with_its_bias(name):
    """Under CUDA's twins the half kernel writes an autocast linear's rounded result itself, its bias rounded
    to the half dtype first and added before the one rounding, as PyTorch's (no float32 product, no add, no
    cast); an op computing in float32 next reads that rounded value widened, as PyTorch's does. Checked
    against PyTorch's autocast linear and an f64 reference; the gradients against the CPU's lowering."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x_np, w_np, b_np, r_np = (rng.standard_normal(s).astype(np.float32)
                              for s in ((2, 24, 40), (48, 40), (48,), (2, 24, 48)))
    results = {}
    for backend in ("CPU", "CUDA_TWINS"):
        with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, backend)):
            x, w, b = (ggrad.tensor(a, requires_grad=True) for a in (x_np, w_np, b_np))
            with ggrad.profile() as prof:
                with ggrad.autocast("cpu", dtype=DTYPES[name]):
                    y = ggrad.linear(x, w, b)
                    z = ggrad.tensor(r_np) + y   # a float32 residual and half: a float32 result
                (z * ggrad.tensor(r_np[::-1].copy())).sum().backward()
                ggrad.realize()
            ran = prof.by_op()
            results[backend] = [y.float().numpy(), z.numpy(), x.grad.numpy(), w.grad.numpy(), b.grad.numpy()]
        assert y.dtype is DTYPES[name] and z.dtype is ggrad.float32
        if backend == "CUDA_TWINS":   # the forward's product, both gradients' and the bias's sum of the half
            # gradient; the bias added in the forward's kernel: the residual's add is the only ADD
            assert ran["MATMUL_HALF"][0] == 4 and ran["ADD"][0] == 1 and "OUT_PROD" not in ran, ran
    tdtype = getattr(torch, {"f16": "float16", "bf16": "bfloat16"}[name])
    with torch.autocast("cpu", dtype=tdtype):
        yt = torch.nn.functional.linear(*(torch.tensor(a) for a in (x_np, w_np, b_np)))
    y16 = [ggrad.tensor(a).to(DTYPES[name]).float().numpy().astype(np.float64) for a in (x_np, w_np, b_np)]
    exact = ggrad.tensor((y16[0] @ y16[1].T + y16[2]).astype(np.float32)).to(DTYPES[name]).float().numpy()
    unit = {"f16": 2.0 ** -10, "bf16": 2.0 ** -7}[name]
    got = results["CUDA_TWINS"]
    np.testing.assert_allclose(got[0], exact, rtol=unit, atol=unit)
    np.testing.assert_allclose(got[0], yt.float().numpy(), rtol=unit, atol=unit)
    np.testing.assert_array_equal(got[1], r_np + got[0])   # z read the rounded value
    for i, (g, want) in enumerate(zip(got[2:], results["CPU"][2:])):
        np.testing.assert_allclose(g, want, rtol=4 * unit, atol=4 * unit * float(np.abs(want).max()), err_msg=i)
