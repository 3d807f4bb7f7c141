"""nn.repack_: quantized weights multiplied through GGML's CPU_REPACK copies give the products of their own
bytes, keep their gradients, reads and exports, and follow changes of the weight."""

import numpy as np
import pytest

import ggrad
from ggrad import nn
from ggrad.autograd import repacked_weights
from ggrad.autograd.step_replay import StepReplay
from ggrad.ggml import GGMLError, build_info, get_raw, repack

if repack.repack_buffer_type() is None:
    pytest.skip("this GGML build has no CPU_REPACK buffer type", allow_module_level=True)
AVX2 = "AVX2" in build_info()["cpu_features"]
# what GGML 0.20.2 repacks on x86 with AVX2 (q8_0 only on ARM, q2_K with AVX-512)
X86_REPACKED = ("q4_0", "q4_K", "iq4_nl", "mxfp4")


def _model(dtype, out=256, seed=0):
    ggrad.manual_seed(seed)
    model = nn.Sequential(nn.Linear(256, out), nn.ReLU(), nn.Linear(out, 32))
    return nn.quantize_(model, dtype, modules=nn.Linear)


def _forward(model, x):
    with ggrad.no_grad():
        return model(x).numpy()


@pytest.mark.skipif(not AVX2, reason="x86 without AVX2: other types repack")
@pytest.mark.parametrize("dtype", X86_REPACKED)
def test_products_equal_unpacked(dtype):
    model = _model(dtype)
    x = ggrad.randn(5, 256)
    x1 = ggrad.randn(1, 256)   # one row: the matrix-vector kernel
    plain, plain1 = _forward(model, x), _forward(model, x1)
    raw = get_raw(model[0].weight._node).copy()
    assert nn.repack_(model) == ["0.weight", "2.weight"]
    assert repacked_weights.twin_of(model[0].weight) is not None
    np.testing.assert_allclose(_forward(model, x), plain, rtol=1e-5, atol=1e-5 * np.abs(plain).max())
    np.testing.assert_allclose(_forward(model, x1), plain1, rtol=1e-5, atol=1e-5 * np.abs(plain1).max())
    np.testing.assert_array_equal(get_raw(model[0].weight._node), raw)   # its own bytes are still there
    np.testing.assert_array_equal(model.state_dict()["0.weight"].numpy(), model[0].weight.numpy())
    assert nn.repack_(model, enabled=False) == [] and repacked_weights.twin_of(model[0].weight) is None


@pytest.mark.skipif(not AVX2, reason="x86 without AVX2: other types repack")
def test_types_and_shapes_without_a_layout_stay():
    assert nn.repack_(_model("q8_0")) == []                          # x86 has no q8_0 layout
    rows = nn.quantize_(nn.ModuleList([nn.Linear(256, 12), nn.Linear(256, 16)]), "q4_0")
    assert nn.repack_(rows) == ["1.weight"]                          # 12 rows: not a multiple of 8
    assert nn.repack_(nn.Linear(256, 16)) == []                      # float weights
    assert nn.repack_(nn.quantize_(nn.Embedding(64, 256), "q4_0")) == []   # read by rows only


@pytest.mark.skipif(not AVX2, reason="x86 without AVX2")
def test_gradients_and_lora_training():
    """The input gradient reads the weight's own bytes (out_prod), LoRA trains on the repacked base."""
    model = _model("q4_0")
    x = ggrad.randn(4, 256, requires_grad=True)
    model(x).sum().backward()
    plain_grad = x.grad.numpy()
    nn.repack_(model)
    x.grad = None
    model(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), plain_grad, rtol=1e-5, atol=1e-5 * np.abs(plain_grad).max())
    nn.lora_(model, r=4)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = ggrad.optim.SGD(params, lr=0.1)
    target = ggrad.randn(4, 32)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = ((model(x.detach()) - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


@pytest.mark.skipif(not AVX2, reason="x86 without AVX2")
def test_a_changed_weight_is_repacked_again():
    model, other = _model("q4_0", seed=0), _model("q4_0", seed=1)
    x = ggrad.randn(3, 256)
    expected = _forward(other, x)
    nn.repack_(model)
    before = repacked_weights.twin_of(model[0].weight)
    model.load_state_dict(other.state_dict())
    np.testing.assert_allclose(_forward(model, x), expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
    assert repacked_weights.twin_of(model[0].weight) is not before


@pytest.mark.skipif(not AVX2, reason="x86 without AVX2")
def test_a_repacked_tensor_is_never_read():
    model = _model("q4_0")
    nn.repack_(model)
    twin = repacked_weights.twin_of(model[0].weight)
    with pytest.raises(GGMLError, match="CPU_REPACK"):
        get_raw(twin._node)


@pytest.mark.skipif(not AVX2, reason="x86 without AVX2")
def test_replayed_decode_step_reads_the_repacked_weights():
    """A step recorded once and replayed (the graph cache's stand-ins over the copies) gives fresh products."""
    model = _model("q4_0")
    plain = [_forward(model, ggrad.tensor(np.full((1, 256), v, np.float32))) for v in (0.5, -1.0, 2.0)]
    nn.repack_(model)
    step = StepReplay(lambda x: model(x), ggrad.device("cpu"))
    with ggrad.no_grad():
        for v, expected in zip((0.5, -1.0, 2.0), plain):
            out = step(np.full((1, 256), v, np.float32))
            np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
    assert step.records == 1
