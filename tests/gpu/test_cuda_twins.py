"""ggrad's CUDA twins (ggrad/ggml/cuda/twins.cu) on CUDA devices: registered wherever their library was
built, each computing what its CPU kernel defines, and chosen by the lowering, so that half products (forward
and both gradients), GELU and layer norm run as ggrad's kernels inside the step's one split.

Skipped without a CUDA device, or where the twins were not built (benchmarks/gpu_run.sh builds GGML with
ggrad's hook and the twins; scripts/install.sh does where CMAKE_ARGS has -DGGML_CUDA=ON).
"""

import numpy as np
import pytest

import ggrad
from ggrad import optim
from ggrad.autograd import execution, lowering
from ggrad.ggml import gpu_twins

DTYPES = {"f16": ggrad.float16, "bf16": ggrad.bfloat16}


def _cuda_params():
    devices = [d for d in ggrad.devices() if d.backend_name == "CUDA"]
    if not devices:
        return [pytest.param(None, marks=pytest.mark.skip(reason="no CUDA device in this GGML build"), id="no-cuda")]
    if not gpu_twins.library_path().is_file():
        return [pytest.param(None, marks=pytest.mark.skip(reason="ggrad's CUDA twins are not built"), id="no-twins")]
    return [pytest.param(d, id=d.torch_name) for d in devices]


@pytest.fixture(params=_cuda_params())
def cuda(request):
    return request.param


def _ops(fn):
    with ggrad.profile() as prof:
        fn()
        ggrad.realize()
    return {op: calls for op, (calls, _) in prof.by_op().items()}


def _halves(shape, seed):
    """Quarters up to +-2: exact in float16 and bfloat16, so the float32 sums are exact too."""
    return (np.random.default_rng(seed).integers(-8, 9, shape) / 4).astype(np.float32)


def test_the_twins_are_registered_and_chosen(cuda):
    assert gpu_twins.registered("CUDA") == frozenset(gpu_twins.TWINS)
    assert ggrad.ggml.build_info()["cuda_twins"] == sorted(gpu_twins.TWINS)
    assert lowering.for_device(cuda) is lowering.CUDA_TWINS


@pytest.mark.parametrize("name", sorted(DTYPES))
@pytest.mark.parametrize("shapes", [((64, 96), (96, 80)), ((3, 40, 64), (64, 24)), ((2, 4, 33, 16), (2, 4, 16, 33)),
                                    ((1, 1), (1, 5))])
def test_half_products_sum_in_float32(cuda, name, shapes):
    """a @ b of half operands (b read transposed in place, a weight broadcast over a batch, attention-like
    batches): float32 sums of the exact half values, by the twin (no GGML product, no copy)."""
    a_np, b_np = _halves(shapes[0], 0), _halves(shapes[1], 1)
    a = ggrad.tensor(a_np, device=cuda).to(DTYPES[name])
    b = ggrad.tensor(b_np, device=cuda).to(DTYPES[name])
    ran = _ops(lambda: (a @ b).float().numpy())
    assert ran.get("MATMUL_HALF") == 1 and "MUL_MAT" not in ran and "CONT" not in ran, ran
    got = (a @ b).float().numpy()
    want = (a_np.astype(np.float64) @ b_np.astype(np.float64)).astype(np.float32)
    want = ggrad.tensor(want).to(DTYPES[name]).float().numpy()   # the result rounded to the operands' dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_autocast_linear_gradients_from_half_operands(cuda, name):
    """An autocast linear's forward and both gradients are three half products summing in float32 (g rounded
    once to the operands' dtype), equal to the CPU's run of the same nodes under the same lowering."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((64, 256), (128, 256), (128,), (64, 128))]
    results = []
    for device in (ggrad.device("cpu"), cuda):
        x, w, b = (ggrad.tensor(a, device=device, requires_grad=True) for a in arrays[:3])
        g = ggrad.tensor(arrays[3], device=device)
        with lowering.forced(ggrad.device("cpu"), lowering.CUDA_TWINS):
            with ggrad.autocast(device.torch_name.split(":")[0], dtype=DTYPES[name]):
                out = ggrad.linear(x, w, b)
            ran = _ops(lambda: (out.float() * g).sum().backward())
        # the forward's product (pending until the backward's compute) and both gradients'; one out_prod: the
        # bias's float32 sum over the rows (a column of ones)
        assert ran.get("MATMUL_HALF") == 3 and ran.get("OUT_PROD", 0) <= 1 and "MUL_MAT" not in ran, (device, ran)
        results.append([out.float().numpy(), x.grad.numpy(), w.grad.numpy(), b.grad.numpy()])
    for what, cpu_value, gpu_value in zip(("out", "dx", "dw", "db"), *results):
        scale = float(np.abs(cpu_value).max())
        np.testing.assert_allclose(gpu_value, cpu_value, rtol=1e-5, atol=1e-5 * scale, err_msg=what)


def test_gelu_twins_are_float32_exact_as_torch(cuda):
    torch = pytest.importorskip("torch")
    finite = np.linspace(-30, 30, 6001, dtype=np.float32)
    x_np = np.concatenate([finite, np.array([np.inf, -np.inf, np.nan, 1e20, -1e20, 20.0, -20.0], dtype=np.float32)])
    x = ggrad.tensor(x_np, device=cuda)
    assert "GELU_TANH_F32" in _ops(lambda: ggrad.nn.functional.gelu(x, approximate="tanh").numpy())
    got = ggrad.nn.functional.gelu(x, approximate="tanh").numpy()
    want = torch.nn.functional.gelu(torch.tensor(x_np), approximate="tanh").numpy()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6, equal_nan=True)
    xg = ggrad.tensor(finite, device=cuda, requires_grad=True)
    ran = _ops(lambda: ggrad.nn.functional.gelu(xg, approximate="tanh").sum().backward())
    assert "GELU_TANH_BACK_F32" in ran, ran
    xt = torch.tensor(finite, requires_grad=True)
    torch.nn.functional.gelu(xt, approximate="tanh").sum().backward()
    np.testing.assert_allclose(xg.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_layer_norm_twins_match_torch(cuda):
    """Layer norm forward and gradient (rows of 512 and of 7: whole warps and a partial one) by the twins."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for width in (512, 7):
        x_np = rng.standard_normal((6, 10, width)).astype(np.float32) * 3 + 1
        g_np = rng.standard_normal((6, 10, width)).astype(np.float32)
        x = ggrad.tensor(x_np, device=cuda, requires_grad=True)
        y = ggrad.nn.functional.layer_norm(x, (width,))
        ran = _ops(lambda: (y * ggrad.tensor(g_np, device=cuda)).sum().backward())
        assert {"LAYER_NORM_F32", "LAYER_NORM_BACK_F32"} <= set(ran), ran
        xt = torch.tensor(x_np, requires_grad=True)
        yt = torch.nn.functional.layer_norm(xt, (width,))
        (yt * torch.tensor(g_np)).sum().backward()
        np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["f32"] + sorted(DTYPES))
def test_a_gpt_step_runs_the_twins_in_one_split(cuda, name):
    """The char-GPT step, f32 (GELU twins) and under autocast (half product twins too): one split, no
    out_prod of half rows, every product of the blocks' half operands by the twin."""
    from ggrad.examples.char_gpt import CharGPT
    ggrad.manual_seed(0)
    model = CharGPT(32, 32, 2, 2, 16).to(cuda)
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = ggrad.tensor(rng.integers(0, 32, (4, 16)).astype(np.int32), device=cuda)
    y = ggrad.tensor(rng.integers(0, 32, 64).astype(np.int32), device=cuda)

    def step():
        with ggrad.autocast("cuda", dtype=DTYPES.get(name, ggrad.float16), enabled=name != "f32"):
            loss = ggrad.cross_entropy(model(x).reshape(-1, 32), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
    step()   # the first step also uploads the initial parameters
    ran = _ops(step)
    assert execution.runtime(cuda).scheduler.n_splits == 1
    assert "GELU_TANH_BACK_F32" in ran or name != "f32", ran
    assert ran.get("MATMUL_HALF", 0) >= (12 if name != "f32" else 0), ran
