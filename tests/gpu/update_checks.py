"""What the tests of ggrad's GPU kernels (CUDA twins, Vulkan shaders) share: the ops a call ran, and AdamW's
update and a GradScaler's check by the device's kernels against the CPU's."""

import numpy as np

import ggrad
from ggrad import optim


def ops_run(fn):
    """{op: calls} of what `fn()` computed."""
    with ggrad.profile() as prof:
        fn()
        ggrad.realize()
    return {op: calls for op, (calls, _) in prof.by_op().items()}


def adamw_and_check_match_the_cpu(device):
    """Three steps, the second with an inf gradient, give the CPU kernels' parameters and moments; the skipped
    step reads the scaler's check in the update itself (no CONCAT or GET_ROWS selection), and leaves every value
    as it was, bit for bit."""
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal((33, 17)).astype(np.float32)
    grads = [rng.standard_normal((33, 17)).astype(np.float32) for _ in range(3)]
    grads[1][4, 5] = np.inf

    def run(dev):
        w = ggrad.nn.Parameter(ggrad.tensor(w0, device=dev))
        opt = optim.AdamW([w], lr=1e-2, weight_decay=0.1)
        scaler = ggrad.amp.GradScaler(dev.torch_name.split(":")[0], init_scale=4.0)
        values = []
        for g in grads:
            opt.zero_grad()
            scaler.scale((w * ggrad.tensor(g, device=dev)).sum()).backward()
            ran = ops_run(lambda: (scaler.step(opt), scaler.update()))
            if dev is device:
                assert ran.get("ADAMW_F32") == 1 and "CONCAT" not in ran and "GET_ROWS" not in ran, ran
                assert ran.get("NONFINITE_F32") == 1, ran   # the scaler's check by the device's kernel
            state = opt.state[w]
            values.append([w.detach().numpy(), state["exp_avg"].numpy(), state["exp_avg_sq"].numpy()])
        return values
    cpu, gpu = run(ggrad.device("cpu")), run(device)
    for step, (want, got) in enumerate(zip(cpu, gpu)):
        for name, a, b in zip(("w", "m", "v"), want, got):
            np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7, err_msg=f"step {step} {name}")
    for a, b in zip(gpu[0], gpu[1]):   # the skipped step
        np.testing.assert_array_equal(b.view(np.uint32), a.view(np.uint32))
