"""numpy <-> tensor data on the CPU backend for every dtype, zero-copy views, and the errors."""

import gc

import numpy as np
import pytest

import ggrad.ggml as gg
from ggrad.ggml import dtypes, lib


def _bf16_reference(x):
    """float32 -> bf16 -> float32 with round-to-nearest-even, computed on the bits in numpy."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype(np.uint32).view(np.float32)


def _round_trip(cpu_tensor, dtype, x):
    t, _ = cpu_tensor(dtype, x.shape)
    gg.set_data(t, x)
    return gg.get_data(t, x.shape)


# ---------------------------------------------------------------- plain types

def test_f32_exact(cpu_tensor, rng):
    x = rng.standard_normal((3, 5, 7)).astype(np.float32)
    y = _round_trip(cpu_tensor, gg.f32, x)
    assert y.dtype == np.float32 and y.shape == x.shape
    np.testing.assert_array_equal(y, x)


def test_f32_from_float64_and_default_shape(cpu_tensor, rng):
    x = rng.standard_normal((2, 3))
    t, _ = cpu_tensor(gg.f32, x.shape)
    gg.set_data(t, x)
    np.testing.assert_array_equal(gg.get_data(t), x.astype(np.float32).reshape(1, 1, 2, 3))


def test_f16_matches_numpy_rounding(cpu_tensor, rng):
    x = (rng.standard_normal((4, 33)) * 100).astype(np.float32)
    x[0, :4] = [65504.0, 1e-7, -0.0, 70000.0]  # largest f16, subnormal, signed zero, overflow to inf
    with np.errstate(over="ignore"):
        y = _round_trip(cpu_tensor, gg.f16, x)
        expected = x.astype(np.float16)
    assert y.dtype == np.float16
    assert np.isinf(y[0, 3])
    np.testing.assert_array_equal(y, expected)


def test_bf16_matches_round_to_nearest_even(cpu_tensor, rng):
    x = (rng.standard_normal((5, 64)) * 1e3).astype(np.float32)
    x[0, :3] = [1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 3e38]  # ties to even, both directions; near max
    y = _round_trip(cpu_tensor, gg.bf16, x)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, _bf16_reference(x))
    assert y[0, 0] == 1.0 and y[0, 1] == 1.0 + 2.0 ** -6  # not just truncation
    assert np.abs(y - x).max() <= np.abs(x).max() * 2.0 ** -8


@pytest.mark.parametrize("dtype, np_type", [(gg.i32, np.int32), (gg.i16, np.int16), (gg.i8, np.int8)])
def test_integers_exact_to_the_limits(cpu_tensor, rng, dtype, np_type):
    info = np.iinfo(np_type)
    x = rng.integers(info.min, info.max, size=(6, 10), endpoint=True).astype(np_type)
    x[0, :3] = [info.min, info.max, 0]
    y = _round_trip(cpu_tensor, dtype, x)
    assert y.dtype == np_type
    np.testing.assert_array_equal(y, x)


# ---------------------------------------------------------------- quantized types

# relative RMS error (error RMS / input std) of normal data, about twice what GGML 0.20.2 gives
QUANT_RMS = {
    "q8_0": 0.012, "q6_k": 0.04, "q5_0": 0.09, "q5_1": 0.08, "q5_k": 0.08, "q4_0": 0.18, "q4_1": 0.16,
    "q4_k": 0.15, "iq4_nl": 0.16, "iq4_xs": 0.16, "mxfp4": 0.25, "nvfp4": 0.2, "q3_k": 0.3, "iq3_s": 0.35,
    "iq3_xxs": 0.45, "q2_k": 0.6, "iq2_s": 0.55,
}
# 1-2 bit and ternary types: only ask that the result follow the input
QUANT_COARSE = ["iq1_m", "tq1_0", "tq2_0", "q1_0", "q2_0"]
NEEDS_IMATRIX = ["iq2_xxs", "iq2_xs", "iq1_s"]
DOT_ONLY = ["q8_1", "q8_k"]


def test_quantized_tables_cover_every_type():
    quantized = {d.name for d in gg.all_dtypes() if d.is_quantized}
    assert quantized == set(QUANT_RMS) | set(QUANT_COARSE) | set(NEEDS_IMATRIX) | set(DOT_ONLY)


@pytest.mark.parametrize("name", sorted(QUANT_RMS))
def test_quantized_round_trip_within_error(cpu_tensor, rng, name):
    dtype = dtypes.from_name(name)
    x = rng.standard_normal((4, 512)).astype(np.float32)
    t, _ = cpu_tensor(dtype, x.shape)
    assert t.nbytes == 4 * 512 // dtype.block_size * dtype.type_size
    gg.set_data(t, x)
    y = gg.get_data(t, x.shape)
    assert y.dtype == np.float32 and y.shape == x.shape
    rel_rms = np.sqrt(np.mean((y - x) ** 2)) / x.std()
    assert rel_rms < QUANT_RMS[name], f"{name}: relative RMS error {rel_rms:.4f}"
    assert rel_rms > 0  # it really was quantized


@pytest.mark.parametrize("name", QUANT_COARSE)
def test_coarse_quantized_follow_input(cpu_tensor, rng, name):
    x = rng.standard_normal((2, 512)).astype(np.float32)
    y = _round_trip(cpu_tensor, dtypes.from_name(name), x)
    assert np.corrcoef(x.ravel(), y.ravel())[0, 1] > 0.6


def test_q8_0_matches_reference(cpu_tensor, rng):
    """q8_0: per block of 32, d = f16(absmax / 127), q = round(x / d), value = q * d."""
    x = rng.standard_normal((3, 64)).astype(np.float32) * 5
    y = _round_trip(cpu_tensor, dtypes.from_name("q8_0"), x)
    blocks = x.reshape(-1, 32)
    d = (np.abs(blocks).max(axis=1, keepdims=True) / 127).astype(np.float16).astype(np.float32)
    q = np.round(blocks * (127 / np.abs(blocks).max(axis=1, keepdims=True)))
    np.testing.assert_allclose(y.reshape(-1, 32), q * d, rtol=1e-6, atol=1e-6)


def test_q4_0_matches_reference(cpu_tensor, rng):
    """q4_0: d = m / -8 with m the value of largest magnitude, q = clip(trunc(x / d + 8.5), 0, 15) - 8."""
    x = rng.standard_normal((2, 96)).astype(np.float32)
    y = _round_trip(cpu_tensor, dtypes.from_name("q4_0"), x)
    blocks = x.reshape(-1, 32)
    m = blocks[np.arange(len(blocks)), np.abs(blocks).argmax(axis=1)][:, None]
    d = m / -8
    q = np.clip(np.trunc(blocks * (1 / d) + 8.5), 0, 15) - 8
    np.testing.assert_allclose(y.reshape(-1, 32), q * d.astype(np.float16).astype(np.float32), rtol=1e-6,
                               atol=1e-6)


@pytest.mark.parametrize("name", NEEDS_IMATRIX)
def test_imatrix_types_raise(cpu_tensor, name):
    t, _ = cpu_tensor(dtypes.from_name(name), (1, 256))
    with pytest.raises(gg.DTypeError, match="importance matrix"):
        gg.set_data(t, np.ones((1, 256), dtype=np.float32))


@pytest.mark.parametrize("name", DOT_ONLY)
def test_dot_product_types_raise(name):
    with pytest.raises(gg.DTypeError, match="dot products"):
        gg.encode(np.ones((1, 256), dtype=np.float32), name)


def test_quantized_row_not_multiple_of_block():
    with pytest.raises(gg.ShapeError, match="multiple of 32"):
        gg.encode(np.ones((2, 48), dtype=np.float32), "q4_0")


def test_decode_checks_byte_count():
    with pytest.raises(gg.ShapeError, match="10 bytes"):
        gg.decode(bytes(10), "q4_0", (64,))
    with pytest.raises(gg.ShapeError):
        gg.decode(np.zeros(7, dtype=np.uint8), "bf16", (4,))


def test_encode_decode_without_tensor(rng):
    x = rng.standard_normal((2, 64)).astype(np.float32)
    raw = gg.encode(x, "q8_0")
    assert raw.dtype == np.uint8 and raw.nbytes == 2 * 2 * 34
    np.testing.assert_allclose(gg.decode(raw, "q8_0", x.shape), x, atol=0.05)


# ---------------------------------------------------------------- zero-copy views

def test_view_shares_memory(cpu_tensor, rng):
    t, buf = cpu_tensor(gg.f32, (4, 8))
    x = rng.standard_normal((4, 8)).astype(np.float32)
    gg.set_data(t, x)
    v = gg.view(t, (4, 8), owner=buf)
    np.testing.assert_array_equal(v, x)
    v[1, 2] = 42.0  # numpy writes reach the tensor
    assert gg.get_data(t, (4, 8))[1, 2] == 42.0
    gg.set_data(t, np.zeros((4, 8), dtype=np.float32))  # tensor writes show in the view
    assert not v.any()


def test_view_keeps_owner_alive(rng):
    ctx = gg.Context(n_tensors=1)
    t = ctx.new_tensor(gg.i32, (1000,))
    buf = gg.alloc_context_tensors(ctx, gg.cpu().buffer_type)
    gg.set_data(t, np.arange(1000, dtype=np.int32))
    v = gg.view(t, owner=buf)
    assert v.shape == (1, 1, 1, 1000)
    del t, buf, ctx
    gc.collect()
    np.testing.assert_array_equal(v.ravel(), np.arange(1000, dtype=np.int32))


@pytest.mark.parametrize("name", ["bf16", "q4_0"])
def test_view_refuses_types_numpy_lacks(cpu_tensor, name):
    t, _ = cpu_tensor(dtypes.from_name(name), (1, 32))
    with pytest.raises(gg.DTypeError, match="get_data"):
        gg.view(t)


# ---------------------------------------------------------------- errors

def test_wrong_element_count(cpu_tensor):
    t, _ = cpu_tensor(gg.f32, (3, 4))
    with pytest.raises(gg.ShapeError, match=r"\(13 elements\)"):
        gg.set_data(t, np.zeros(13, dtype=np.float32))
    with pytest.raises(gg.ShapeError, match="get_data"):
        gg.get_data(t, (5, 3))


def test_same_count_other_shape_is_accepted(cpu_tensor):
    t, _ = cpu_tensor(gg.f32, (3, 4))
    gg.set_data(t, np.arange(12, dtype=np.float32).reshape(2, 6))
    np.testing.assert_array_equal(gg.get_data(t, (3, 4)), np.arange(12, dtype=np.float32).reshape(3, 4))


def test_unallocated_tensor():
    ctx = gg.Context(n_tensors=1)
    t = ctx.new_tensor(gg.f32, (4,))
    assert not t.is_allocated
    for call in (lambda: gg.set_data(t, np.zeros(4, dtype=np.float32)), lambda: gg.get_data(t),
                 lambda: gg.view(t)):
        with pytest.raises(gg.GGMLError, match="no backend memory"):
            call()


def test_context_memory_is_not_backend_memory():
    """A tensor in a no_alloc=False context has data but no backend buffer: refused, not crashed."""
    ctx = gg.Context(n_tensors=1, no_alloc=False)
    t = ctx.new_tensor(gg.f32, (4,))
    with pytest.raises(gg.GGMLError, match="no backend memory"):
        gg.set_data(t, np.zeros(4, dtype=np.float32))


def test_non_contiguous_tensor():
    ctx = gg.Context(n_tensors=2)
    t = ctx.new_tensor(gg.f32, (6, 4))
    tr = gg.GTensor(lib.ggml_transpose(ctx.ptr, t.ptr), ctx)
    buf = gg.alloc_context_tensors(ctx, gg.cpu().buffer_type)  # places t and makes tr a view of it
    assert tr.is_allocated and not tr.is_contiguous
    with pytest.raises(gg.ShapeError, match="not contiguous"):
        gg.set_data(tr, np.zeros((6, 4), dtype=np.float32))
    with pytest.raises(gg.ShapeError, match="not contiguous"):
        gg.get_data(tr, (6, 4))
    del buf


def test_location_is_buffer_and_address():
    """Two tensors at one address of two buffers are told apart (Vulkan's buffers all start at one made-up
    address, so compile_step finds a gradient among a graph's results by location, not by address)."""
    ctx = gg.Context(n_tensors=3)
    a, b = ctx.new_tensor(gg.f32, (4,)), ctx.new_tensor(gg.f32, (4,))
    first, second = gg.Buffer(gg.cpu().buffer_type, 64), gg.Buffer(gg.cpu().buffer_type, 64)
    first.place(a)
    second.place(b)
    assert a.location[0] != b.location[0] and a.location != b.location
    b.ptr.data = a.ptr.data   # as on Vulkan: the same address in another buffer
    assert a.location != b.location
    b.ptr.buffer = a.ptr.buffer
    assert a.location == b.location
    view = gg.GTensor(lib.ggml_view_1d(ctx.ptr, a.ptr, 2, 8), ctx)
    gg.placement.follow_sources([view.ptr])
    assert view.location == (a.location[0], a.location[1] + 8)


def test_copy_tensor_copies_bytes_and_refuses_other_layouts(cpu_tensor, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    src, _ = cpu_tensor("f32", (3, 4))
    dst, _ = cpu_tensor("f32", (3, 4))
    gg.set_data(src, x)
    gg.copy_tensor(src, dst)
    np.testing.assert_array_equal(gg.get_data(dst, (3, 4)), x)
    for dtype, shape in (("f16", (3, 4)), ("f32", (4, 3))):
        other, _ = cpu_tensor(dtype, shape)
        with pytest.raises(gg.ShapeError, match="copy_tensor"):
            gg.copy_tensor(src, other)
