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
from ggrad.autograd import execution, lowering, memory
from ggrad.ggml import gpu_twins

from update_checks import adamw_and_check_match_the_cpu

DTYPES = {"f16": ggrad.float16, "bf16": ggrad.bfloat16}


def _ops(fn):
    with ggrad.profile() as prof:
        fn()
        ggrad.realize()
    return {op: calls for op, (calls, _) in prof.by_op().items()}


def _halves(shape, seed):
    """Quarters up to +-2: exact in float16 and bfloat16, so the float32 sums are exact too."""
    return (np.random.default_rng(seed).integers(-8, 9, shape) / 4).astype(np.float32)


def test_the_twins_are_registered_and_chosen(cuda):
    everything = gpu_twins.TWINS + (gpu_twins.OVERRIDES,)   # the overrides come with the twins
    assert gpu_twins.registered("CUDA") == frozenset(everything)
    assert ggrad.ggml.build_info()["cuda_twins"] == sorted(everything)
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
        with execution.forced_lowering(ggrad.device("cpu"), lowering.CUDA_TWINS):
            with ggrad.autocast(device.torch_name.split(":")[0], dtype=DTYPES[name]):
                out = ggrad.linear(x, w, b)
            ran = _ops(lambda: (out.float() * g).sum().backward())
        # the forward's product (pending until the backward's compute), both gradients' and the bias's sum of
        # the half gradient over the rows (a column of ones, summing in float32)
        assert ran.get("MATMUL_HALF") == 4 and "OUT_PROD" not in ran and "MUL_MAT" not in ran, (device, ran)
        results.append([out.float().numpy(), x.grad.numpy(), w.grad.numpy(), b.grad.numpy()])
    for what, cpu_value, gpu_value in zip(("out", "dx", "dw", "db"), *results):
        # float32 sums in another order; `out` is then rounded to the half dtype (one unit of it apart, at most)
        tol = {"f16": 2e-3, "bf16": 8e-3}[name] if what == "out" else 1e-5
        scale = float(np.abs(cpu_value).max())
        np.testing.assert_allclose(gpu_value, cpu_value, rtol=tol, atol=tol * scale, err_msg=what)


def _on_both(fn, arrays, cuda):
    """fn's results (numpy) on the CPU, whose kernels are checked against PyTorch (tests/autograd/
    test_lowering.py), and on `cuda` by the twins. PyTorch is not imported here: its CUDA libraries and a CUDA
    build of GGML in one process abort it (bench_gpt_gpu.py)."""
    return [fn(*[ggrad.tensor(a, device=device, requires_grad=True) for a in arrays])
            for device in (ggrad.device("cpu"), cuda)]


def test_gelu_twins_match_the_cpu_kernels(cuda):
    finite = np.linspace(-30, 30, 6001, dtype=np.float32)
    x_np = np.concatenate([finite, np.array([np.inf, -np.inf, np.nan, 1e20, -1e20, 20.0, -20.0], dtype=np.float32)])

    def forward(x):
        y = ggrad.nn.functional.gelu(x, approximate="tanh")
        assert "GELU_TANH_F32" in _ops(lambda: y.numpy())
        return y.detach().numpy()

    def gradient(x):   # (the sum's gradient needs no forward value: only the gradient's node computes)
        ran = _ops(lambda: ggrad.nn.functional.gelu(x, approximate="tanh").sum().backward())
        assert "GELU_TANH_BACK_F32" in ran, ran
        return x.grad.numpy()
    cpu, gpu = _on_both(forward, [x_np], cuda)
    np.testing.assert_allclose(gpu, cpu, rtol=2e-6, atol=2e-6, equal_nan=True)
    cpu, gpu = _on_both(gradient, [finite], cuda)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_half_gelu_twins_match_the_cpu_kernels(cuda, name):
    """GELU of a float16/bfloat16 tensor stays in its dtype under the twins' lowering (gelu_tanh_half and its
    gradient, no cast around them), each element rounded once as the CPU's kernels round it."""
    finite = np.linspace(-30, 30, 6001, dtype=np.float32)
    # 6,009 and 6,001 elements: 8 at a time, and a tail one by one
    x_np = np.concatenate([finite, np.array([np.inf, -np.inf, np.nan, 1e4, -1e4, 20.0, -20.0, -0.0], np.float32)])
    g_np = np.random.default_rng(0).standard_normal(finite.shape).astype(np.float32)
    results = []
    for device in (ggrad.device("cpu"), cuda):
        with execution.forced_lowering(ggrad.device("cpu"), lowering.CUDA_TWINS):
            x = ggrad.tensor(x_np, device=device).to(DTYPES[name])
            ggrad.realize()
            ran = _ops(lambda: ggrad.nn.functional.gelu(x, approximate="tanh").float().numpy())
            assert "GELU_TANH_HALF" in ran and ran.get("CPY") == 1, ran   # the one cast: .float() for numpy
            y = ggrad.nn.functional.gelu(x, approximate="tanh")
            xf = ggrad.tensor(finite, device=device).to(DTYPES[name]).requires_grad_()
            g = ggrad.tensor(g_np, device=device).to(DTYPES[name])
            ggrad.realize()
            ran = _ops(lambda: ggrad.nn.functional.gelu(xf, approximate="tanh").backward(g))
            assert "GELU_TANH_BACK_HALF" in ran and "CPY" not in ran, ran
            assert y.dtype is DTYPES[name] and xf.grad.dtype is DTYPES[name]
            results.append((y.float().numpy(), xf.grad.float().numpy()))
    (cpu_y, cpu_dx), (gpu_y, gpu_dx) = results
    # one unit in the last place of the half dtype apart at most (f32 math in another order before rounding)
    unit = {"f16": 2.0 ** -10, "bf16": 2.0 ** -7}[name]
    np.testing.assert_allclose(gpu_y, cpu_y, rtol=unit, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(gpu_dx, cpu_dx, rtol=unit, atol=1e-6)


def test_layer_norm_twins_match_the_cpu_kernels(cuda):
    """Layer norm forward and gradient (rows of 512 and of 7: whole warps and a partial one) by the twins."""
    rng = np.random.default_rng(3)
    for width in (512, 7):
        x_np = rng.standard_normal((6, 10, width)).astype(np.float32) * 3 + 1
        g_np = rng.standard_normal((6, 10, width)).astype(np.float32)

        def run(x, g):
            y = ggrad.nn.functional.layer_norm(x, (width,))
            ran = _ops(lambda: (y * g.detach()).sum().backward())
            assert {"LAYER_NORM_F32", "LAYER_NORM_BACK_F32"} <= set(ran), ran
            return y.detach().numpy(), x.grad.numpy()
        (y_cpu, dx_cpu), (y_gpu, dx_gpu) = _on_both(run, [x_np, g_np], cuda)
        np.testing.assert_allclose(y_gpu, y_cpu, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(dx_gpu, dx_cpu, rtol=1e-4, atol=1e-5)


def test_layer_norm_affine_twin_matches_the_cpu_kernel(cuda):
    """nn.LayerNorm's forward (the core times w plus b, one node) by the twin, rows of 512 and of 7."""
    rng = np.random.default_rng(4)
    for width in (512, 7):
        arrays = [rng.standard_normal((6, 10, width)).astype(np.float32) * 3 + 1,
                  rng.standard_normal(width).astype(np.float32), rng.standard_normal(width).astype(np.float32)]

        def run(x, w, b):
            with ggrad.no_grad():
                y = ggrad.nn.functional.layer_norm(x, (width,), w, b)
                assert "LAYER_NORM_AFFINE_F32" in _ops(lambda: y.numpy())
            return y.numpy()
        cpu, gpu = _on_both(run, arrays, cuda)
        np.testing.assert_allclose(gpu, cpu, rtol=1e-5, atol=1e-5)


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
    assert memory.runtime(cuda).scheduler.n_splits == 1
    assert "GELU_TANH_BACK_F32" in ran or name != "f32", ran
    assert ran.get("MATMUL_HALF", 0) >= (12 if name != "f32" else 0), ran


@pytest.mark.parametrize("case", ["heads", "odd", "leading", "transposed"])
def test_concat_twin_matches_the_cpu_kernel(cuda, case):
    """Joins of f32 views by the twin (attention heads' gradients side by side: permuted views read 4 floats at a
    time; odd sizes and transposed parts one at a time) give the CPU kernel's result exactly."""
    rng = np.random.default_rng(4)
    shapes, dim, view = {"heads": (((2, 8, 16, 64), (2, 8, 16, 64)), 1, lambda t: t.permute(0, 2, 1, 3)),
                         "odd": (((3, 5, 7), (3, 4, 7)), 1, lambda t: t),
                         "leading": (((2, 6, 8), (3, 6, 8)), 0, lambda t: t),
                         "transposed": (((6, 4), (5, 4)), 1, lambda t: t.t())}[case]
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]

    def join(a, b):
        out = ggrad.cat([view(a), view(b)], dim=dim)
        assert "CONCAT_F32" in _ops(lambda: out.numpy()), case
        return out.detach().numpy()
    cpu, gpu = _on_both(join, arrays, cuda)
    np.testing.assert_array_equal(gpu, cpu)


def test_adamw_twin_matches_the_cpu_kernel_and_skips_on_the_check(cuda):
    """AdamW's update and the GradScaler's check by their twins (CUDA_TWINS chooses ggrad's kernels)."""
    adamw_and_check_match_the_cpu(cuda)
