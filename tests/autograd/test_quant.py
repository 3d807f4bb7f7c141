"""ggrad.quantize / Tensor.dequantize for every GGML type, and matmuls with a quantized weight."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import ggrad
from ggrad.ggml import lib

ROOT = pathlib.Path(__file__).resolve().parents[2]

# relative RMS round-trip error (error RMS / input std) on a normal 64x512 matrix: about 1.5x what
# GGML 0.20.2 gives (q8_0 0.0054, q4_0 0.087, q4_K 0.071, q2_K 0.30, iq2_xxs 0.35, tq1_0 0.81, ...)
RMS_BOUND = {
    "q8_0": 0.008, "q6_k": 0.027, "q5_k": 0.055, "q5_1": 0.057, "q5_0": 0.064, "q4_k": 0.11, "q4_1": 0.12,
    "iq4_nl": 0.115, "iq4_xs": 0.115, "q4_0": 0.13, "nvfp4": 0.14, "mxfp4": 0.17, "q3_k": 0.23, "iq3_s": 0.25,
    "iq3_xxs": 0.32, "iq2_s": 0.4, "q2_k": 0.45, "iq2_xs": 0.46, "iq2_xxs": 0.52, "iq1_s": 0.74, "iq1_m": 0.87,
    "q1_0": 0.9, "q2_0": 0.9, "tq1_0": 0.9, "tq2_0": 0.9,
}
DOT_ONLY = ["q8_1", "q8_k"]


def _needs_imatrix(name):
    return bool(lib.ggml_quantize_requires_imatrix(ggrad.ggml.as_dtype(name).value))


def test_the_table_covers_every_quantized_type():
    assert {d.name for d in ggrad.ggml.all_dtypes() if d.is_quantized} == set(RMS_BOUND) | set(DOT_ONLY)


@pytest.mark.parametrize("name", sorted(RMS_BOUND))
def test_round_trip_error_per_type(name):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 512)).astype(np.float32)
    imatrix = (rng.random(512) + 0.5).astype(np.float32) if _needs_imatrix(name) else None
    q = ggrad.quantize(ggrad.tensor(x), name, imatrix=imatrix)
    assert q.dtype.name == name and q.shape == x.shape and not q.requires_grad
    y = q.dequantize()
    assert y.dtype is ggrad.float32 and y.shape == x.shape
    rel_rms = np.sqrt(np.mean((y.numpy() - x) ** 2)) / x.std()
    assert 0 < rel_rms < RMS_BOUND[name], f"{name}: relative RMS error {rel_rms:.4f}"
    np.testing.assert_array_equal(q.numpy(), y.numpy())       # reading a quantized tensor dequantizes too


def test_imatrix_required_where_ggml_needs_one_and_checked():
    x = ggrad.randn(2, 256)
    with pytest.raises(ggrad.DTypeError, match="iq2_xxs: this type needs an importance matrix"):
        ggrad.quantize(x, "iq2_xxs")
    with pytest.raises(ggrad.ShapeError, match=r"imatrix must have shape \(256,\)"):
        ggrad.quantize(x, "iq2_xxs", imatrix=np.ones(128))
    weighted = ggrad.quantize(x, "q4_K", imatrix=np.linspace(0.1, 10, 256))   # optional for the others
    assert weighted.dtype.name == "q4_k"


def test_row_size_and_type_errors_name_the_type_and_shape():
    with pytest.raises(ggrad.ShapeError, match=r"q4_0 packs each row in blocks of 32.*shape \(4, 48\)"):
        ggrad.quantize(ggrad.randn(4, 48), "q4_0")
    with pytest.raises(ggrad.ShapeError, match=r"q4_k packs each row in blocks of 256.*shape \(\)"):
        ggrad.quantize(ggrad.tensor(1.0), "q4_K")
    with pytest.raises(ggrad.DTypeError, match="f16 is not a quantized GGML type"):
        ggrad.quantize(ggrad.randn(2, 32), "f16")
    with pytest.raises(ggrad.DTypeError, match="only inside dot products"):
        ggrad.quantize(ggrad.randn(2, 256), "q8_K")
    with pytest.raises(ggrad.DTypeError, match="floating point"):
        ggrad.quantize(ggrad.tensor([[1] * 32]), "q8_0")
    with pytest.raises(RuntimeError, match="only floating point tensors can require gradients"):
        ggrad.quantize(ggrad.randn(1, 32), "q8_0").requires_grad_()


def test_dequantize_of_a_float_tensor_is_float32():
    h = ggrad.randn(3).half()
    assert h.dequantize().dtype is ggrad.float32
    np.testing.assert_array_equal(h.dequantize().numpy(), h.numpy())


# GGML's codebook quantizers abort on such inputs (found in subprocesses): each must raise here instead.
_HOSTILE_QUANTIZE = """
import numpy as np, ggrad
rng = np.random.default_rng(0)
cases = []
for name in ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m"):
    x = rng.standard_normal((4, 256)).astype(np.float32)
    for bad in (np.nan, np.inf, 1e19):
        y = x.copy()
        y[1, 7] = bad
        cases.append((name, y, np.ones(256, np.float32)))
    cases.append((name, x, np.full(256, 1e30, np.float32)))
    cases.append((name, x, np.full(256, np.nan, np.float32)))
raised = 0
for name, x, imatrix in cases:
    try:
        ggrad.quantize(ggrad.tensor(x), name, imatrix=imatrix)
    except ggrad.ggml.errors.ArgumentError as e:     # a ValueError
        assert name in str(e), e
        raised += 1
print(len(cases), raised)
"""


def test_inputs_that_abort_ggml_codebook_quantizers_raise_in_a_subprocess():
    out = subprocess.run([sys.executable, "-c", _HOSTILE_QUANTIZE], capture_output=True, text=True, timeout=300,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    n, raised = out.stdout.split()
    assert n == raised == "35"


def _activation_bound(x, wd):
    """|x @ w.T - exact| bound: GGML rounds x to 8 bits (q8_0/q8_1/q8_K blocks) for the dot product."""
    block_max = np.abs(x).reshape(x.shape[0], -1, 32).max(axis=-1, keepdims=True)
    per_element = np.broadcast_to(block_max, x.shape[:1] + (x.shape[1] // 32, 32)).reshape(x.shape) / 127
    return per_element @ np.abs(wd).T + 1e-4


@pytest.mark.parametrize("name", ["q8_0", "q4_0", "q5_1", "q4_k", "q6_k", "iq4_nl"])
def test_matmul_with_a_quantized_weight_matches_the_dequantized_product(name, one_thread):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 256)).astype(np.float32)
    qw = ggrad.quantize(ggrad.tensor(rng.standard_normal((48, 256)).astype(np.float32)), name)
    wd = qw.dequantize().numpy()
    xt = ggrad.tensor(x, requires_grad=True)
    y = xt @ qw.T
    assert y.shape == (5, 48) and y.dtype is ggrad.float32
    err = np.abs(y.numpy() - x @ wd.T)
    assert (err <= _activation_bound(x, wd)).all(), f"{name}: max error {err.max():.4g}"
    g = rng.standard_normal((5, 48)).astype(np.float32)
    y.backward(ggrad.tensor(g))
    np.testing.assert_allclose(xt.grad.numpy(), g @ wd, rtol=1e-5, atol=1e-5)


def test_the_input_gradient_of_a_quantized_product_is_differentiable(one_thread):
    """create_graph: x's gradient g @ w (w dequantized in the graph) differentiates again, in x."""
    rng = np.random.default_rng(4)
    qw = ggrad.quantize(ggrad.tensor(rng.standard_normal((16, 64)).astype(np.float32)), "q4_0")
    wd = qw.dequantize().numpy()
    x = ggrad.tensor(rng.standard_normal((3, 64)).astype(np.float32), requires_grad=True)
    y = x @ qw.T
    (gx,) = ggrad.autograd.grad((y * y).sum(), x, create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), 2 * y.detach().numpy() @ wd, rtol=1e-5, atol=1e-4)
    (gxx,) = ggrad.autograd.grad(gx.sum(), x)
    expected = np.broadcast_to(2 * wd.sum(axis=1) @ wd, (3, 64))
    np.testing.assert_allclose(gxx.numpy(), expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_linear_and_batched_inputs_with_a_quantized_weight(one_thread):
    rng = np.random.default_rng(2)
    qw = ggrad.quantize(ggrad.tensor(rng.standard_normal((8, 64)).astype(np.float32)), "q8_0")
    x = rng.standard_normal((2, 3, 64)).astype(np.float32)
    bias = ggrad.randn(8)
    y = ggrad.linear(ggrad.tensor(x), qw, bias)
    assert y.shape == (2, 3, 8)
    ref = x @ qw.dequantize().numpy().T + bias.numpy()
    np.testing.assert_allclose(y.numpy(), ref, atol=0.05 * np.abs(ref).max())
    assert (ggrad.tensor(x[0, 0]) @ qw.T).shape == (8,)
    with pytest.raises(ggrad.ShapeError, match=r"inner dims 32 != 64"):
        ggrad.randn(2, 32) @ qw.T


# A transposed quantized weight held in a variable: GGML cannot copy it apart from its blocks (it
# corrupted the heap before); it stays a view of its base and reads as its dequantized transpose.
_HELD_TRANSPOSE = """
import numpy as np, ggrad
from ggrad.autograd.raw import to_raw
rng = np.random.default_rng(3)
qw = ggrad.quantize(ggrad.tensor(rng.standard_normal((48, 256)).astype(np.float32)), "q4_0")
wd = qw.dequantize().numpy()
x = rng.standard_normal((5, 256)).astype(np.float32)
wt = qw.T
version = wt._version
first = (ggrad.tensor(x) @ wt).numpy()
again = (ggrad.tensor(x) @ wt).numpy()            # wt held across two computes
assert np.array_equal(first, again) and wt._version == version   # derived again, nothing written
assert np.abs(first - x @ wd.T).max() < 0.05 * np.abs(x @ wd.T).max()
assert np.array_equal(wt.numpy(), wd.T) and np.array_equal(wt.dequantize().numpy(), wd.T)
assert np.array_equal(ggrad.dequantize(wt.T).numpy(), wd) and wt.shape == (256, 48)
assert np.array_equal(wt.float().numpy(), wd.T) and np.array_equal(wt.to(ggrad.float16).numpy(), wd.T.astype(np.float16))
for attempt in (wt.contiguous, lambda: to_raw(wt)):
    try:
        attempt().numpy()
    except ggrad.ShapeError as e:
        assert "q4_0" in str(e), e
    else:
        raise AssertionError("no error")
print("ok")
"""


@pytest.mark.parametrize("eager", ["0", "1"])
def test_a_held_transposed_quantized_weight_is_a_view_of_its_blocks(eager):
    env = dict(os.environ, GGRAD_EAGER=eager)
    out = subprocess.run([sys.executable, "-c", _HELD_TRANSPOSE], capture_output=True, text=True, timeout=300,
                         cwd=ROOT, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
