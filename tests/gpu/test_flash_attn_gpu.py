"""Flash attention's CUDA twins (ggrad/ggml/cuda/flash_attn.cu) against the CPU kernels they twin, which
tests/ggml/test_flash_attn.py checks against PyTorch (PyTorch is not imported here: its CUDA libraries and a CUDA
build of GGML in one process abort it). float16 and bfloat16 operands run on tensor cores, rounding P, dS and
dO to the operands' type as FlashAttention does: half tolerances; float32 operands (forced: CUDA's lowering
leaves them to GGML's products) to ~1e-5. The autocast GPT step runs them in its one split, with no softmax.

Skipped without a CUDA device or where the twins were not built (benchmarks/gpu_run.sh builds both).
"""

import dataclasses

import numpy as np
import pytest

import ggrad
from ggrad.autograd import execution, lowering

DTYPES = {"f16": ggrad.float16, "bf16": ggrad.bfloat16, "f32": ggrad.float32}
TOLERANCE = {"f16": 5e-3, "bf16": 3e-2, "f32": 2e-5}
CPU = ggrad.device("cpu")
KERNEL_CPU = dataclasses.replace(lowering.CPU, attention="kernel")


def _ops(fn):
    with ggrad.profile() as prof:
        out = fn()
        ggrad.realize()
    return out, {op for op in prof.by_op()}


def attend(device, arrays, dtype, choices, **kwargs):
    """sdpa's output and q, k, v's gradients (numpy) on `device` under `choices`, and the ops that ran."""
    q_np, k_np, v_np, g_np = arrays[:4]
    mask = None if len(arrays) < 5 else ggrad.tensor(arrays[4], device=device)
    with execution.forced_lowering(device, choices):
        q, k, v = (ggrad.tensor(a, device=device, requires_grad=True) for a in (q_np, k_np, v_np))

        def run():
            args = [t.to(DTYPES[dtype]) for t in (q, k, v)]
            out = ggrad.nn.functional.scaled_dot_product_attention(*args, attn_mask=mask, **kwargs)
            (out.float() * ggrad.tensor(g_np, device=device)).sum().backward()
            return out.float().numpy()
        out, ran = _ops(run)
    return [out, q.grad.numpy(), k.grad.numpy(), v.grad.numpy()], ran


CASES = {   # q shape, k shape, dv, sdpa's arguments
    "causal": ((2, 4, 100, 64), (2, 4, 100, 64), 64, dict(is_causal=True)),
    "gqa_rect": ((2, 4, 70, 48), (2, 2, 130, 48), 40, dict(enable_gqa=True)),
    "mask": ((2, 3, 37, 33), (2, 3, 45, 33), 33, dict(mask=True)),
    "wide": ((1, 2, 65, 128), (1, 2, 65, 128), 128, dict(is_causal=True)),
    "widest": ((1, 1, 40, 256), (1, 1, 70, 256), 200, {}),
    "narrow": ((3, 2, 20, 16), (3, 2, 20, 16), 16, dict(is_causal=True)),
}


def case_arrays(case):
    """q, k, v, the output's gradient (and the mask) of CASES[case], and sdpa's other arguments."""
    q_shape, k_shape, dv, kwargs = CASES[case]
    kwargs = dict(kwargs)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32)
              for s in (q_shape, k_shape, k_shape[:-1] + (dv,), q_shape[:-1] + (dv,))]
    if kwargs.pop("mask", False):
        mask = (rng.standard_normal((q_shape[0], 1, q_shape[2], k_shape[2])) * 2).astype(np.float32)
        mask[:, :, :, 5::7] = -np.inf
        mask[0, 0, 3] = -np.inf   # a row that sees no key: zeros
        arrays.append(mask)
    return arrays, kwargs


def self_attention_arrays():
    """x, the output's gradient, in_proj_weight and bias and out_proj's weight of the one-op self-attention."""
    rng = np.random.default_rng(1)
    e, b, t = 64, 3, 70
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((b, t, e), (b, t, e))]
    return arrays + [(rng.standard_normal(s) * 0.2).astype(np.float32) for s in ((3 * e, e), (3 * e,), (e, e))]


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_twins_match_the_cpu_kernels(cuda, dtype, case):
    arrays, kwargs = case_arrays(case)
    gpu_choices = lowering.CUDA_TWINS if dtype != "f32" else dataclasses.replace(lowering.CUDA_TWINS,
                                                                                  attention="kernel")
    want, _ = attend(CPU, arrays, dtype, KERNEL_CPU, **kwargs)
    got, ran = attend(cuda, arrays, dtype, gpu_choices, **kwargs)
    assert {"FLASH_ATTN", "FLASH_ATTN_BACK"} <= ran and "SOFT_MAX_BACK" not in ran, ran
    assert execution.runtime(cuda).scheduler.n_splits == 1
    tol = TOLERANCE[dtype]
    for name, g, w in zip(("out", "dq", "dk", "dv"), got, want):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * float(np.abs(w).max()), err_msg=name)


def test_cudas_lowering_takes_half_operands_only(cuda):
    assert lowering.for_device(cuda).attention == "half_kernel"
    arrays = [np.ones((1, 1, 8, 8), np.float32)] * 4
    _, ran = attend(cuda, arrays, "f32", lowering.for_device(cuda), is_causal=True)
    assert "FLASH_ATTN" not in ran


@pytest.mark.parametrize("name", ["f16", "bf16"])
def test_an_autocast_gpt_step_attends_by_the_twins_in_one_split(cuda, name):
    from ggrad import optim
    from ggrad.examples.char_gpt import CharGPT
    ggrad.manual_seed(0)
    model = CharGPT(32, 64, 2, 2, 32).to(cuda)
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = ggrad.tensor(rng.integers(0, 32, (4, 32)).astype(np.int32), device=cuda)
    y = ggrad.tensor(rng.integers(0, 32, 128).astype(np.int32), device=cuda)

    def step():
        with ggrad.autocast("cuda", dtype=DTYPES[name]):
            loss = ggrad.cross_entropy(model(x).reshape(-1, 32), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    first = step()
    losses, ran = _ops(lambda: [step() for _ in range(5)])
    assert execution.runtime(cuda).scheduler.n_splits == 1
    assert {"FLASH_ATTN", "FLASH_ATTN_BACK"} <= ran and not {"SOFT_MAX", "SOFT_MAX_BACK"} & ran, ran
    assert np.isfinite(losses).all() and losses[-1] < first


def self_attend(device, arrays, dtype, choices, causal):
    """MultiheadAttention's self-attention (the one-op SelfAttention: the kernels write O token-major and qkv's
    gradient joined) under autocast to `dtype` on `device`: its output, x's and in_proj_weight's gradients
    (numpy), and the ops that ran."""
    x_np, g_np, w_np, b_np, wo_np = arrays
    t = x_np.shape[1]
    with execution.forced_lowering(device, choices):
        mha = ggrad.nn.MultiheadAttention(w_np.shape[1], 4, batch_first=True)
        state = {"in_proj_weight": w_np, "in_proj_bias": b_np, "out_proj.weight": wo_np,
                 "out_proj.bias": b_np[:wo_np.shape[0]]}
        mha.load_state_dict({name: ggrad.tensor(value) for name, value in state.items()})
        mha = mha.to(device)
        x = ggrad.tensor(x_np, device=device, requires_grad=True)
        mask = dict(attn_mask=np.triu(np.ones((t, t), bool), 1), is_causal=True) if causal else {}

        def run():
            with ggrad.autocast(device.type, dtype=DTYPES[dtype]):
                out, _ = mha(x, x, x, need_weights=False, **mask)
            (out.float() * ggrad.tensor(g_np, device=device)).sum().backward()
            return out.float().numpy()
        out, ran = _ops(run)
    return [out, x.grad.numpy(), mha.in_proj_weight.grad.numpy()], ran


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_the_one_op_self_attention_by_the_twins_matches_the_cpu_kernels(cuda, dtype, causal):
    """The token-major layouts on the GPU (O merged by a view, qkv's gradient joined by the kernel: no
    concatenation) give the CPU kernels' values."""
    arrays = self_attention_arrays()
    want, _ = self_attend(CPU, arrays, dtype, KERNEL_CPU, causal)
    got, ran = self_attend(cuda, arrays, dtype, lowering.CUDA_TWINS, causal)
    assert "FLASH_ATTN_BACK" in ran and not {"CONCAT", "CONCAT_F32", "SOFT_MAX_BACK"} & ran, ran
    tol = TOLERANCE[dtype]
    for name, g, w in zip(("out", "dx", "d in_proj_weight"), got, want):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * float(np.abs(w).max()), err_msg=name)
