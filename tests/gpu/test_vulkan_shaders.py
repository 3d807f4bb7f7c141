"""ggrad's Vulkan shaders (ggrad/ggml/vulkan/*.comp) on Vulkan devices: registered wherever GGML's Vulkan backend
carries ggrad's hook and the shaders are built, each computing what its CPU kernel defines, and chosen by the
lowering, so that GELU, layer norm, AdamW's update and a GradScaler's check run as ggrad's kernels inside the
step's one split.

Skipped without a Vulkan device, or where the shaders or the hook are missing (benchmarks/gpu_run.sh and
benchmarks/lavapipe.sh build GGML with the hook and compile the shaders; scripts/install.sh does where
CMAKE_ARGS has -DGGML_VULKAN=ON).
"""

import dataclasses

import numpy as np
import pytest

import ggrad
from ggrad.autograd import execution, lowering, memory
from ggrad.ggml import vulkan_shaders

from test_flash_attn_gpu import (CASES, CPU, DTYPES, KERNEL_CPU, attend, case_arrays, self_attend,
                                 self_attention_arrays)
from update_checks import adamw_and_check_match_the_cpu, ops_run

SPECIAL = [0.0, -0.0, 1.0, -1.0, 19.99, 20.01, -20.01, 35.0, -35.0, 1e30, -1e30, np.inf, -np.inf, np.nan]


def test_the_shaders_are_registered_and_chosen(vulkan):
    assert vulkan_shaders.registered("Vulkan") == frozenset(vulkan_shaders.SHADERS)
    assert ggrad.ggml.build_info()["vulkan_shaders"] == sorted(vulkan_shaders.SHADERS)
    assert lowering.for_device(vulkan) is lowering.VULKAN_SHADERS


@pytest.mark.parametrize("start", [0, 1, 3], ids=["aligned", "one-float-in", "three-floats-in"])
def test_gelu_shaders_match_the_cpu_kernels(vulkan, start):
    """Forward and gradient against the CPU's kernels and PyTorch, with inf, nan and the clamp's edges, on
    views that start inside a buffer's offset alignment (the hook passes each binding's misalignment)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x_np = np.concatenate([np.asarray(SPECIAL, np.float32), rng.standard_normal(1000).astype(np.float32) * 4])
    g_np = rng.standard_normal(x_np.size).astype(np.float32)
    results = {}
    for device in (ggrad.device("cpu"), vulkan):
        whole = ggrad.tensor(np.concatenate([np.zeros(start, np.float32), x_np]), device=device)
        x = whole[start:].detach().requires_grad_()   # a view that starts `start` floats into its buffer
        y = ggrad.nn.functional.gelu(x, approximate="tanh")
        ran = ops_run(lambda: y.numpy())
        assert "GELU_TANH_F32" in ran, ran
        ran = ops_run(lambda: (y * ggrad.tensor(g_np, device=device)).sum().backward())
        assert "GELU_TANH_BACK_F32" in ran, ran
        results[device.backend_name] = y.numpy(), x.grad.numpy()
    xt = torch.tensor(x_np, requires_grad=True)
    yt = torch.nn.functional.gelu(xt, approximate="tanh")
    (yt * torch.tensor(g_np)).sum().backward()
    for i, what in enumerate(("gelu", "its gradient")):
        cpu, gpu = results["CPU"][i], results["Vulkan"][i]
        assert np.array_equal(np.isnan(gpu), np.isnan(cpu)), what
        np.testing.assert_allclose(gpu, cpu, rtol=1e-5, atol=1e-6, err_msg=what)
        want = (yt if i == 0 else xt.grad).detach().numpy()
        np.testing.assert_allclose(gpu, want, rtol=1e-4, atol=1e-5, err_msg=f"{what} against PyTorch")


def test_a_gpt_step_with_the_shaders_is_one_split(vulkan):
    """The char-GPT's f32 step (GELU by ggrad's shaders) stays on the device and trains as on the CPU."""
    from ggrad.examples.char_gpt import CharGPT
    losses = {}
    for device in (ggrad.device("cpu"), vulkan):
        ggrad.manual_seed(0)
        model = CharGPT(96, 32, 2, 2, 16).to(device)
        opt = ggrad.optim.AdamW(model.parameters(), lr=1e-2)
        x = np.random.default_rng(1).integers(0, 96, (4, 17)).astype(np.int32)
        run = []
        for _ in range(3):
            loss = ggrad.cross_entropy(model(ggrad.tensor(x[:, :-1], device=device)).reshape(-1, 96),
                                       ggrad.tensor(x[:, 1:].reshape(-1), device=device))
            opt.zero_grad()
            ran = ops_run(lambda: loss.backward())
            opt.step()
            run.append(loss.item())
        losses[device.backend_name] = run
    assert "GELU_TANH_BACK_F32" in ran, ran
    assert memory.runtime(vulkan).scheduler.n_splits == 1
    np.testing.assert_allclose(losses["Vulkan"], losses["CPU"], rtol=1e-3)


def test_adamw_shader_matches_the_cpu_kernel_and_skips_on_the_check(vulkan):
    adamw_and_check_match_the_cpu(vulkan)


@pytest.mark.parametrize("where", [None, (0, np.inf), (8, -np.inf), (9, np.nan), (10, np.inf)],
                         ids=["finite", "first-inf", "ninth-minus-inf", "tenth-nan", "last-inf"])
def test_the_check_shader_sees_every_gradient(vulkan, where):
    """Eleven gradients take two check nodes (nine sources at most a node): an inf or a nan in any of them,
    at the end of a large one too, skips the step; none leaves it taken."""
    rng = np.random.default_rng(3)
    shapes = [(7,), (300, 301)] + [(13, 5)] * 9
    params = [ggrad.nn.Parameter(ggrad.tensor(rng.standard_normal(s).astype(np.float32), device=vulkan))
              for s in shapes]
    opt = ggrad.optim.AdamW(params, lr=1e-2)
    scaler = ggrad.amp.GradScaler("vulkan", init_scale=2.0)
    weights = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    if where is not None:
        weights[where[0]].reshape(-1)[-1] = where[1]
    loss = sum((p * ggrad.tensor(w, device=vulkan)).sum() for p, w in zip(params, weights))
    scaler.scale(loss).backward()
    before = [p.detach().numpy().copy() for p in params]
    ran = ops_run(lambda: (scaler.step(opt), scaler.update()))
    assert ran.get("NONFINITE_F32") == 2, ran
    changed = [not np.array_equal(b, p.detach().numpy()) for b, p in zip(before, params)]
    assert changed == [where is None] * len(params)
    assert scaler.get_scale() == (2.0 if where is None else 1.0)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("start", [0, 1, 3], ids=["aligned", "one-half-in", "three-halves-in"])
def test_half_gelu_shaders_match_the_cpu_kernels(vulkan, name, start):
    """GELU of a float16/bfloat16 tensor in its dtype (the half shaders, no cast around them) against the
    CPU's half kernels under the same lowering, on views that start inside a buffer's offset alignment: the
    same f32 math rounded once to nearest even (written out in the shader), one unit of the last place apart
    at most (exp computed otherwise); nan, infinities, half's largest values and its subnormals included."""
    dtype = getattr(ggrad, name)
    rng = np.random.default_rng(1)
    special = SPECIAL[:-4] + [6.5e4, -6.5e4, 1e-6, -3e-7, np.inf, -np.inf, np.nan]
    x_np = np.concatenate([np.asarray(special, np.float32), rng.standard_normal(1000).astype(np.float32) * 4])
    g_np = rng.standard_normal(x_np.size).astype(np.float32)
    results = {}
    for device in (ggrad.device("cpu"), vulkan):
        with execution.forced_lowering(ggrad.device("cpu"), lowering.VULKAN_SHADERS):
            whole = ggrad.tensor(np.concatenate([np.zeros(start, np.float32), x_np]), device=device).to(dtype)
            g = ggrad.tensor(g_np, device=device).to(dtype)
            ggrad.realize()
            x = whole[start:].detach().requires_grad_()   # a view `start` halves into its buffer
            y = ggrad.nn.functional.gelu(x, approximate="tanh")
            ran = ops_run(lambda: y.backward(g))
            assert {"GELU_TANH_HALF", "GELU_TANH_BACK_HALF"} <= set(ran) and "CPY" not in ran, ran
            assert y.dtype is dtype and x.grad.dtype is dtype
            results[device.backend_name] = y.float().numpy(), x.grad.float().numpy()
    unit = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}[name]
    for i, what in enumerate(("gelu", "its gradient")):
        cpu, gpu = results["CPU"][i], results["Vulkan"][i]
        assert np.array_equal(np.isnan(gpu), np.isnan(cpu)), what
        np.testing.assert_allclose(gpu, cpu, rtol=unit, atol=1e-7, err_msg=what)
        # rounded as the CPU rounds: a unit apart only where the f32 math differed (rare), not half the time
        assert np.mean((gpu != cpu) & ~np.isnan(cpu)) < 0.02, what


@pytest.mark.parametrize("shape", [(6, 10, 512), (6, 10, 7), (2, 1000), (70000, 3)],
                         ids=["512-wide", "7-wide", "1000-wide", "70000-rows"])
def test_layer_norm_shaders_match_the_cpu_kernels(vulkan, shape):
    """Layer norm's core forward and gradient, and nn.LayerNorm's forward (core, weight and bias in one node),
    against the CPU's kernels: rows narrower and wider than a workgroup, and more rows than one grid
    dimension holds (65,535 workgroups)."""
    rng = np.random.default_rng(3)
    width = shape[-1]
    x_np = rng.standard_normal(shape).astype(np.float32) * 3 + 1
    g_np = rng.standard_normal(shape).astype(np.float32)
    w_np, b_np = rng.standard_normal(width).astype(np.float32), rng.standard_normal(width).astype(np.float32)
    results = {}
    for device in (ggrad.device("cpu"), vulkan):
        x = ggrad.tensor(x_np, device=device, requires_grad=True)
        y = ggrad.nn.functional.layer_norm(x, (width,), eps=1e-3)
        ran = ops_run(lambda: (y * ggrad.tensor(g_np, device=device)).sum().backward())
        assert {"LAYER_NORM_F32", "LAYER_NORM_BACK_F32"} <= set(ran), ran
        with ggrad.no_grad():
            w, b = ggrad.tensor(w_np, device=device), ggrad.tensor(b_np, device=device)
            affine = ggrad.nn.functional.layer_norm(x, (width,), w, b, eps=1e-3)
            assert "LAYER_NORM_AFFINE_F32" in ops_run(lambda: affine.numpy())
        results[device.backend_name] = y.detach().numpy(), x.grad.numpy(), affine.numpy()
    for what, cpu, gpu in zip(("y", "dx", "affine"), results["CPU"], results["Vulkan"]):
        np.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-5, err_msg=what)


FLASH = dataclasses.replace(lowering.VULKAN_SHADERS, attention="kernel")   # forced (lowering.VULKAN_SHADERS)
LAST_BIT = {"f16": 2.0 ** -10, "bf16": 2.0 ** -7, "f32": 1e-5}   # relative; f32: summation orders


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_flash_shaders_match_the_cpu_kernels(vulkan, dtype, case):
    """sdpa by the flash attention shaders (forward, and the backward from L: no scores kept) against the CPU's
    kernels: causal, grouped-query with more keys than queries, an additive mask with -inf runs and a row that
    sees no key, heads of 16 to 256. Both sum in f32 from the operands (half ones converted), in other orders:
    results rounded to a half type may differ by its last bit."""
    arrays, kwargs = case_arrays(case)
    want, _ = attend(CPU, arrays, dtype, KERNEL_CPU, **kwargs)
    got, ran = attend(vulkan, arrays, dtype, FLASH, **kwargs)
    assert {"FLASH_ATTN", "FLASH_ATTN_BACK"} <= ran and "SOFT_MAX_BACK" not in ran, ran
    assert memory.runtime(vulkan).scheduler.n_splits == 1
    for name, g, w in zip(("out", "dq", "dk", "dv"), got, want):
        tol = 2 * LAST_BIT[dtype]
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * float(np.abs(w).max()), err_msg=name)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_the_one_op_self_attention_by_the_shaders_matches_the_cpu_kernels(vulkan, dtype, causal):
    """The token-major layouts (O merged by a view, qkv's gradient joined by the kernel) on Vulkan."""
    arrays = self_attention_arrays()
    want, _ = self_attend(CPU, arrays, dtype, KERNEL_CPU, causal)
    got, ran = self_attend(vulkan, arrays, dtype, FLASH, causal)
    assert "FLASH_ATTN_BACK" in ran and not {"CONCAT", "CONCAT_F32", "SOFT_MAX_BACK"} & ran, ran
    tol = 4 * LAST_BIT[dtype]   # autocast's products round their operands and results around attention
    for name, g, w in zip(("out", "dx", "d in_proj_weight"), got, want):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * float(np.abs(w).max()), err_msg=name)

