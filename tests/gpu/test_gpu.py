"""ggrad on every GPU device of the installed GGML: ops agree with the CPU, training runs as one graph.

Parametrized over `[d for d in ggrad.devices() if d.kind == "gpu"]` (CUDA0, Vulkan0, ...); with none,
every test is skipped with the reason. Point `GGRAD_GGML_LIB_DIR` at a GGML build with CUDA or Vulkan
to run them without reinstalling. `GGRAD_TEST_RPC=host:port` adds a running GGML RPC server's device
(GGML reports RPC devices as GPUs: device memory that is not host memory), which exercises the same
paths on a machine without a GPU.
"""

import gc
import os

import numpy as np
import pytest

import ggrad
from ggrad import nn, optim
from ggrad.autograd import memory


def _gpu_devices():
    endpoint = os.environ.get("GGRAD_TEST_RPC")
    if endpoint:
        ggrad.ggml.rpc_add_server(endpoint)
    return [d for d in ggrad.devices() if d.kind == "gpu"]


def _device_params():
    gpus = _gpu_devices()
    if not gpus:
        reason = ("no GPU device in this GGML build (ggrad.devices() lists no device of kind 'gpu'); "
                  "build GGML with -DGGML_CUDA=ON or -DGGML_VULKAN=ON and point GGRAD_GGML_LIB_DIR at it")
        return [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="no-gpu")]
    return [pytest.param(d, id=d.torch_name) for d in gpus]


@pytest.fixture(params=_device_params())
def gpu(request):
    return request.param


def _close(got, want, rtol=2e-3, what=""):
    """Elementwise agreement, the absolute tolerance scaled by the reference's magnitude."""
    want = np.asarray(want, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=what)


# ---------------------------------------------------------------- (a) ops forward + backward vs CPU

def _inputs(rng):
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    causal = np.triu(np.full((6, 6), -np.inf, dtype=np.float32), 1)
    return {
        "matmul": dict(a=r(2, 8, 16), b=r(16, 12)),
        "softmax_ext_mask": dict(x=r(2, 3, 6, 6), mask=(causal, False)),
        "layer_norm": dict(x=r(4, 10, 32), w=r(32), b=r(32)),
        "gelu": dict(x=r(5, 33)),
        "embedding": dict(w=r(20, 8), idx=(rng.integers(0, 20, (3, 7)).astype(np.int32), False)),
        "cross_entropy": dict(logits=r(12, 10), y=(rng.integers(0, 10, 12).astype(np.int32), False)),
        "conv2d": dict(x=r(2, 3, 9, 9), w=r(4, 3, 3, 3) * 0.3, b=r(4)),
    }


_OPS = {
    "matmul": lambda t: t["a"] @ t["b"],
    "softmax_ext_mask": lambda t: ggrad.softmax_ext(t["x"], t["mask"], scale=0.5),
    "layer_norm": lambda t: ggrad.layer_norm(t["x"], 32, t["w"], t["b"]),
    "gelu": lambda t: ggrad.gelu(t["x"]),
    "embedding": lambda t: ggrad.embedding(t["idx"], t["w"]),
    "cross_entropy": lambda t: ggrad.cross_entropy(t["logits"], t["y"]),
    "conv2d": lambda t: ggrad.conv2d(t["x"], t["w"], t["b"], padding=1),
}


def _run_op(name, device, seed=0):
    """Forward value and the gradients of sum(out * r) for every float input, computed on `device`."""
    rng = np.random.default_rng(seed)
    spec = _inputs(rng)[name]
    tensors = {}
    for key, value in spec.items():
        array, grad = value if isinstance(value, tuple) else (value, True)
        tensors[key] = ggrad.tensor(array, device=device, requires_grad=grad)
    out = _OPS[name](tensors)
    assert out.device == ggrad.device(device)
    weight = rng.standard_normal(out.shape).astype(np.float32)
    (out * ggrad.tensor(weight, device=device)).sum().backward()
    grads = {}
    for key, t in tensors.items():
        if t.requires_grad:
            assert t.grad is not None, f"{name}: no gradient for {key}"
            assert t.grad.device == t.device, f"{name}: gradient of {key} on {t.grad.device}, not {t.device}"
            grads[key] = t.grad.numpy()
    return out.numpy(), grads


@pytest.mark.parametrize("name", list(_OPS))
def test_op_forward_backward_matches_cpu(gpu, name):
    want_out, want_grads = _run_op(name, "cpu")
    got_out, got_grads = _run_op(name, gpu)
    _close(got_out, want_out, what=f"{name} forward on {gpu.name}")
    assert set(got_grads) == set(want_grads)
    for key in want_grads:
        _close(got_grads[key], want_grads[key], what=f"{name} d/d{key} on {gpu.name}")


# ---------------------------------------------------------------- (b) one graph per training step

def _mlp_problem(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((64, 8)).astype(np.float32)
    y = (rng.integers(0, 4, 64)).astype(np.int32)
    return x, y


def _mlp(device, seed=0):
    ggrad.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
    return model, optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)


def _train_step(model, opt, x, y, device):
    loss = ggrad.cross_entropy(model(ggrad.tensor(x, device=device)), ggrad.tensor(y, device=device))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def test_training_step_is_one_graph_compute_and_loss_decreases(gpu):
    x, y = _mlp_problem()
    model, opt = _mlp(gpu)
    first = _train_step(model, opt, x, y, gpu).item()   # realizes the initial parameters and optimizer state too
    losses = [first]
    for _ in range(3):
        before = ggrad.stats()["computes"]
        loss = _train_step(model, opt, x, y, gpu)
        assert ggrad.stats()["computes"] == before + 1, "a training step must be ONE graph compute"
        losses.append(loss.item())
        assert ggrad.stats()["computes"] == before + 1, "reading the loss after the step computes nothing"
    for _ in range(60):
        losses.append(_train_step(model, opt, x, y, gpu).item())
    assert np.isfinite(losses).all()
    assert losses[-1] < 0.5 * losses[0], f"loss did not decrease on {gpu.name}: {losses[0]:.4f} -> {losses[-1]:.4f}"


@pytest.mark.parametrize("which", ["sgd_momentum", "adamw"])
def test_training_matches_cpu(gpu, which):
    """Five optimizer steps of the same model on the GPU and on the CPU give the same parameters.

    AdamW divides by sqrt(v), which turns rounding differences of near-zero gradients into steps of up
    to lr: its tolerance is lr-sized, SGD's is tight.
    """
    x, y = _mlp_problem()
    results = []
    for dev in ("cpu", gpu):
        model, opt = _mlp(dev)
        if which == "sgd_momentum":
            opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for _ in range(5):
            _train_step(model, opt, x, y, dev).item()
        results.append([p.numpy() for p in model.parameters()])
    for i, (want, got) in enumerate(zip(*results)):
        _close(got, want, rtol=1e-3 if which == "sgd_momentum" else 5e-3,
               what=f"parameter {i} after 5 {which} steps on {gpu.name}")


# ---------------------------------------------------------------- (c) f16 weights

def test_f16_weight_matmul(gpu):
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((48, 64)) * 0.2).astype(np.float16)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    g = rng.standard_normal((16, 48)).astype(np.float32)
    wt = ggrad.tensor(w, device=gpu)
    assert wt.dtype is ggrad.float16
    xt = ggrad.tensor(x, device=gpu, requires_grad=True)
    out = ggrad.linear(xt, wt)
    assert out.device == gpu
    (out * ggrad.tensor(g, device=gpu)).sum().backward()
    w32 = w.astype(np.float32)
    _close(out.numpy(), x @ w32.T, rtol=1e-2, what=f"f16 linear forward on {gpu.name}")
    _close(xt.grad.numpy(), g @ w32, rtol=1e-2, what=f"f16 linear d/dx on {gpu.name}")


# ---------------------------------------------------------------- (d) parameters stay on the device

def test_model_to_device_and_optimizer_keep_parameters_there(gpu):
    x, y = _mlp_problem()
    model, opt = _mlp("cpu")
    params = list(model.parameters())
    start = [p.numpy().copy() for p in params]
    model.to(gpu)
    assert [id(p) for p in model.parameters()] == [id(p) for p in params], "to() must keep the Parameters"
    assert all(p.device == gpu for p in params)
    for _ in range(3):
        _train_step(model, opt, x, y, gpu).item()
    for p, s in zip(params, start):
        assert p.device == gpu, f"parameter moved to {p.device.torch_name}"
        assert p.grad is not None and p.grad.device == gpu
        assert not np.allclose(p.numpy(), s), "the optimizer did not update the parameter"
    for state in opt.state.values():
        for v in state.values():
            if isinstance(v, ggrad.Tensor):
                assert v.device == gpu, f"optimizer state on {v.device.torch_name}"
    # the parameters' memory is device memory
    for p in params:
        assert p._node.ptr.buffer != ggrad.ggml.ffi.NULL
        assert not ggrad.ggml.lib.ggml_backend_buffer_is_host(p._node.ptr.buffer)
    model.to("cpu")
    assert all(p.device.is_cpu for p in params)


# ---------------------------------------------------------------- (e) device memory

def test_device_memory_reported(gpu):
    gc.collect()
    memory.reset_pools()   # earlier tests' pooled buffers, which an allocation may release meanwhile
    free, total = gpu.memory()
    assert isinstance(free, int) and isinstance(total, int)
    assert 0 < free <= total, (free, total)
    assert gpu.total_memory == total
    if gpu.backend_name == "CUDA":
        # CUDA reports cudaMemGetInfo: a 256 MiB tensor on the device shows up in it
        t = ggrad.zeros(64, 1024, 1024, device=gpu).realize()
        assert t._node.ptr.buffer != ggrad.ggml.ffi.NULL
        after = gpu.free_memory
        assert free - after >= 200 << 20, (free, after)
        del t
        memory.reset_pools()


def test_gpt_training_step_is_one_split(gpu):
    """No op of the char-GPT training step falls back to the CPU: the scheduler runs it in one split."""
    if gpu.backend_name == "RPC":
        pytest.skip("an RPC device's backend is another machine's; the split count is about local backends")
    from ggrad.examples.char_gpt import CharGPT
    ggrad.manual_seed(0)
    model = CharGPT(32, 32, 2, 2, 16).to(gpu)
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = ggrad.tensor(rng.integers(0, 32, (4, 16)).astype(np.int32), device=gpu)
    y = ggrad.tensor(rng.integers(0, 32, 64).astype(np.int32), device=gpu)
    for _ in range(2):   # the first step also uploads the initial parameters
        loss = ggrad.cross_entropy(model(x).reshape(-1, 32), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
    assert memory.runtime(gpu).scheduler.n_splits == 1
