"""ggrad's own CPU kernels (ggrad/ggml/kernels.py) against numpy, with each instruction set this CPU has.
The product: every tile edge, k past one packed block, rows past one packed block, transposed and permuted
operands read in place, batch broadcasting, k = 0, more threads than work; with few rows of b (dot
products) every count up to past the switch to packing, the same bits at any thread count or strides.
GELU and layer norm, each with its gradient: vector tails. Concat: strided, transposed and permuted parts.
AdamW: against GGML's opt_step_adamw."""

import os
import subprocess
import sys

import numpy as np
import pytest

import ggrad.ggml as gg
from ggrad.ggml import kernels, ops
from ggrad.ggml.errors import DTypeError, ShapeError


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


def test_isa_names_the_instruction_set_in_use():
    assert kernels.isa() in ("avx512", "avx2", "generic")
    assert kernels.isa("generic") == "generic"
    assert kernels.isa() == "generic"
    best = kernels.isa("best")
    assert kernels.isa() == best
    with pytest.raises(ValueError, match="isa"):
        kernels.isa("sse9")


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (7, 5, 3), (32, 12, 16), (33, 13, 17), (64, 24, 256),
                                   (100, 50, 257), (385, 30, 40), (800, 3, 600), (5, 700, 9), (128, 1024, 128)])
def test_matmul_f32_matches_numpy(check, isa, m, n, k):
    a, b = _rand(m, k), _rand(n, k, seed=1)
    check(lambda ctx, x, y: kernels.matmul_f32(ctx, x, y), [a, b], lambda x, y: y @ x.T, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("transpose_a,transpose_b", [(True, False), (False, True), (True, True)])
def test_matmul_f32_reads_transposed_views_in_place(check, transpose_a, transpose_b):
    a, b = _rand(40, 70), _rand(50, 70, seed=1)   # products of a (m, k) and b (n, k)
    a_in = a.T.copy() if transpose_a else a
    b_in = b.T.copy() if transpose_b else b

    def build(ctx, x, y):
        return kernels.matmul_f32(ctx, ops.transpose(ctx, x) if transpose_a else x,
                                  ops.transpose(ctx, y) if transpose_b else y)
    check(build, [a_in, b_in], lambda x, y: b @ a.T, atol=1e-4, rtol=1e-4)


def test_matmul_f32_permuted_batches_and_broadcast(check):
    a = _rand(3, 2, 20, 36)   # [r, q, n, k] in numpy order
    b = _rand(3, 4, 36, 30, seed=1)   # stored k-major: read through a permute to [r, q*2, m, k]

    def build(ctx, x, y):
        return kernels.matmul_f32(ctx, x, ops.permute(ctx, y, 1, 0, 2, 3))

    def ref(x, y):
        return np.swapaxes(y, -1, -2) @ np.swapaxes(np.repeat(x, 2, axis=1), -1, -2)
    check(build, [a, b], ref, atol=1e-4, rtol=1e-4)


def test_matmul_f32_empty_k_gives_zeros(check):
    check(lambda ctx, x, y: kernels.matmul_f32(ctx, x, y), [np.zeros((5, 0), np.float32),
                                                             np.zeros((3, 0), np.float32)],
          lambda x, y: np.zeros((3, 5), np.float32))


@pytest.mark.parametrize("threads", [3, 8])
def test_matmul_f32_more_threads_than_batches_or_tiles(threads):
    a, b = _rand(2, 10, 24), _rand(2, 7, 24, seed=1)
    np.testing.assert_allclose(_matmul_on_threads(a, b, threads), b @ np.swapaxes(a, -1, -2), atol=1e-4, rtol=1e-4)


GEMV_ROWS_MAX = 64   # the most rows of b any instruction set takes as dot products (csrc/matmul.c)


def _on_threads(build, arrays, threads):
    """The data (flat) of the node `build(ctx, tensors)` makes from f32 tensors holding `arrays`, computed on
    the CPU at `threads` threads, and the node."""
    ctx = gg.Context(n_tensors=16)
    ts = [ctx.new_tensor("f32", tuple(reversed(a.shape))) for a in arrays]
    out = build(ctx, ts)
    keep = gg.alloc_context_tensors(ctx, gg.cpu().buffer_type)
    for t, a in zip(ts, arrays):
        gg.set_data(t, a)
    sched = gg.Scheduler("cpu", graph_size=16)
    graph = gg.Graph(16)
    graph.build_forward_expand(out)
    sched.alloc(graph)
    before = gg.threads.policy.fixed
    gg.set_num_threads(threads)
    try:
        sched.compute(graph)
    finally:
        gg.set_num_threads(before)
    result = gg.get_data(out).reshape(-1).copy()
    del keep
    return result, out


def _matmul_on_threads(a, b, threads, view_a=None, view_b=None):
    """The kernel's product of a and b (b @ a.T batched, or with view_a/view_b(ctx, t) the product of those
    views of them) at `threads` threads"""
    def build(ctx, ts):
        ta, tb = ts
        return kernels.matmul_f32(ctx, view_a(ctx, ta) if view_a else ta, view_b(ctx, tb) if view_b else tb)
    result, out = _on_threads(build, [a, b], threads)
    return result.reshape(tuple(reversed(out.ne[:b.ndim])))   # numpy order, b's dims


@pytest.mark.parametrize("m,k", [(37, 45), (9, 300), (70, 16)])
def test_matmul_f32_few_rows_of_b_match_numpy(check, isa, m, k):
    # dot products for n up to the switch, packed tiles past it: rows of a past a multiple of the block,
    # k past whole vectors (45, 300) or none (16)
    a = _rand(m, k)
    for n in range(1, GEMV_ROWS_MAX + 2):
        b = _rand(n, k, seed=n)
        check(lambda ctx, x, y: kernels.matmul_f32(ctx, x, y), [a, b], lambda x, y: y @ x.T, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("n", [1, 3, 7, 30])
def test_matmul_f32_few_rows_of_strided_operands(check, isa, n):
    # b transposed (copied along k for the dot products) or a row-strided view; a transposed (packed)
    a, b = _rand(41, 33), _rand(n, 33, seed=1)

    def b_transposed(ctx, x, y):
        return kernels.matmul_f32(ctx, x, ops.transpose(ctx, y))
    check(b_transposed, [a, b.T.copy()], lambda x, y: b @ a.T, atol=1e-4, rtol=1e-4)

    def a_transposed(ctx, x, y):
        return kernels.matmul_f32(ctx, ops.transpose(ctx, x), y)
    check(a_transposed, [a.T.copy(), b], lambda x, y: b @ a.T, atol=1e-4, rtol=1e-4)

    wide = _rand(41, 50)   # a's rows 50 floats apart, the first 33 of each read

    def rows_apart(ctx, x, y):
        return kernels.matmul_f32(ctx, ops.view_2d(ctx, x, 33, 41, x.nb[1], 0), y)
    check(rows_apart, [wide, b], lambda x, y: y @ x[:, :33].T, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("n", [1, 2, 5, 13, GEMV_ROWS_MAX + 1, 100])
def test_matmul_f32_same_bits_at_any_thread_count(isa, n):
    a, b = _rand(301, 67), _rand(n, 67, seed=2)
    want = b @ a.T
    results = [_matmul_on_threads(a, b, threads) for threads in (1, 2, 3, 8)]
    np.testing.assert_allclose(results[0], want, atol=1e-4, rtol=1e-4)
    for got in results[1:]:
        np.testing.assert_array_equal(got.view(np.uint32), results[0].view(np.uint32))


@pytest.mark.parametrize("n", [1, 5, 13, GEMV_ROWS_MAX + 1])
def test_matmul_f32_same_bits_whatever_the_strides(isa, n):
    # ggrad may hand the kernel one product in several layouts (a weight or its transposed copy viewed
    # back): dot products and packed tiles alike give the same bits for each
    a, b = _rand(45, 70), _rand(n, 70, seed=3)

    def transposed(ctx, t):
        return ops.transpose(ctx, t)
    plain = _matmul_on_threads(a, b, 2)
    np.testing.assert_allclose(plain, b @ a.T, atol=1e-4, rtol=1e-4)
    for got in (_matmul_on_threads(a.T.copy(), b, 2, view_a=transposed),
                _matmul_on_threads(a, b.T.copy(), 2, view_b=transposed),
                _matmul_on_threads(a.T.copy(), b.T.copy(), 1, view_a=transposed, view_b=transposed)):
        np.testing.assert_array_equal(got.view(np.uint32), plain.view(np.uint32))


def test_matmul_f32_few_rows_with_a_copied_in_blocks_of_16_rows(isa):
    # a transposed is copied along k for the dot products a block of rows at a time: 16 rows where k is
    # past MC x KC / 16 = 8192, so 40 rows take three blocks; the bits are those of a read in place
    a, b = _rand(40, 9000), _rand(3, 9000, seed=4)
    plain = _matmul_on_threads(a, b, 1)
    np.testing.assert_allclose(plain, b @ a.T, atol=1e-3, rtol=1e-4)
    got = _matmul_on_threads(a.T.copy(), b, 1, view_a=lambda ctx, t: ops.transpose(ctx, t))
    np.testing.assert_array_equal(got.view(np.uint32), plain.view(np.uint32))


def test_matmul_f32_rejects_bad_operands():
    ctx = gg.Context(n_tensors=8)
    with pytest.raises(ShapeError, match="matmul_f32"):
        kernels.matmul_f32(ctx, ctx.new_tensor("f32", (4, 3)), ctx.new_tensor("f32", (5, 3)))
    with pytest.raises(ShapeError, match="matmul_f32"):
        kernels.matmul_f32(ctx, ctx.new_tensor("f32", (4, 3, 2)), ctx.new_tensor("f32", (4, 3, 3)))
    with pytest.raises(DTypeError, match="matmul_f32"):
        kernels.matmul_f32(ctx, ctx.new_tensor("f16", (4, 3)), ctx.new_tensor("f32", (4, 3)))


@pytest.mark.parametrize("n", [1, 3, 40])   # dot products, and packed tiles past GEMV_ROWS_MAX rows of b
def test_matmul_f32_with_a_bias_has_the_bits_of_the_product_and_an_add(run, isa, n):
    a, b, bias = _rand(70, 33), _rand(n, 33, seed=1), _rand(70, seed=2)
    fused, _ = run(lambda ctx, x, y, c: kernels.matmul_f32(ctx, x, y, c), [a, b, bias])
    apart, _ = run(lambda ctx, x, y, c: ops.add(ctx, kernels.matmul_f32(ctx, x, y), c), [a, b, bias])
    np.testing.assert_allclose(fused[0].reshape(n, 70), b @ a.T + bias, atol=1e-4, rtol=1e-4)
    np.testing.assert_array_equal(fused[0].view(np.uint32), apart[0].view(np.uint32))


def test_matmul_f32_rejects_a_bias_of_another_length():
    ctx = gg.Context(n_tensors=8)
    with pytest.raises(ShapeError, match="bias ne=\\[5, 1, 1, 1\\] must be \\[3, 1, 1, 1\\]"):
        kernels.matmul_f32(ctx, ctx.new_tensor("f32", (4, 3)), ctx.new_tensor("f32", (4, 2)),
                           ctx.new_tensor("f32", (5,)))


def _np_gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _np_gelu_tanh_grad(x):
    u = np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)
    du = np.sqrt(2 / np.pi) * (1 + 3 * 0.044715 * x ** 2)
    return 0.5 * (1 + np.tanh(u)) + 0.5 * x * (1 - np.tanh(u) ** 2) * du


@pytest.mark.parametrize("n", [1, 15, 16, 17, 1000])
def test_gelu_tanh_f32_and_its_gradient_match_float64(check, isa, n):
    x = (np.random.default_rng(n).standard_normal(n) * 4).astype(np.float32)
    g = np.random.default_rng(n + 1).standard_normal(n).astype(np.float32)
    x64 = x.astype(np.float64)
    check(lambda ctx, t: kernels.gelu_tanh_f32(ctx, t), [x], lambda t: _np_gelu_tanh(x64).astype(np.float32),
          atol=1e-6, rtol=1e-6)
    check(lambda ctx, gt, t: kernels.gelu_tanh_back_f32(ctx, gt, t), [g, x],
          lambda gt, t: (g * _np_gelu_tanh_grad(x64)).astype(np.float32), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", ["gelu_tanh_f32", "relu_f32"])
def test_elementwise_kernels_reject_bad_operands(name):
    """An elementwise kernel and its gradient (`name` and `name` with _back_) take contiguous f32 of one
    shape: anything else is an error naming the kernel."""
    forward = getattr(kernels, name)
    back_name = name.replace("_f32", "_back_f32")
    backward = getattr(kernels, back_name)
    ctx = gg.Context(n_tensors=8)
    x = ctx.new_tensor("f32", (4, 3))
    with pytest.raises(ShapeError, match=name):
        forward(ctx, ops.transpose(ctx, x))
    with pytest.raises(DTypeError, match=name):
        forward(ctx, ctx.new_tensor("f16", (4, 3)))
    with pytest.raises(ShapeError, match=back_name):
        backward(ctx, ctx.new_tensor("f32", (3, 4)), x)


def test_half_kernels_reject_bad_operands():
    """GELU's half kernels take contiguous f16 or bf16 of one dtype and shape; matmul_half's bias is a
    contiguous [m] of the operands' dtype and comes with a rounded result: anything else is an error
    naming the kernel."""
    ctx = gg.Context(n_tensors=16)
    x = ctx.new_tensor("f16", (4, 3))
    with pytest.raises(DTypeError, match="gelu_tanh_half"):
        kernels.gelu_tanh_half(ctx, ctx.new_tensor("f32", (4, 3)))
    with pytest.raises(ShapeError, match="gelu_tanh_half"):
        kernels.gelu_tanh_half(ctx, ops.transpose(ctx, x))
    with pytest.raises(DTypeError, match="gelu_tanh_back_half"):
        kernels.gelu_tanh_back_half(ctx, ctx.new_tensor("bf16", (4, 3)), x)
    with pytest.raises(ShapeError, match="gelu_tanh_back_half"):
        kernels.gelu_tanh_back_half(ctx, ctx.new_tensor("f16", (3, 4)), x)
    a, b = ctx.new_tensor("f16", (8, 5)), ctx.new_tensor("f16", (8, 3))   # GGML order: k = 8, m = 5, n = 3
    for bias, rounded in ((ctx.new_tensor("f16", (5,)), False), (ctx.new_tensor("f32", (5,)), True),
                          (ctx.new_tensor("f16", (4,)), True)):
        with pytest.raises(ShapeError, match="matmul_half: bias"):
            kernels.matmul_half(ctx, a, b, bias, rounded)
    assert kernels.matmul_half(ctx, a, b, ctx.new_tensor("f16", (5,)), True).dtype.name == "f16"


@pytest.mark.parametrize("dim", [0, 1, 2, 3])
def test_concat_f32_joins_any_strided_parts(check, dim):
    a, b = _rand(2, 3, 4, 5), _rand(2, 3, 4, 5, seed=1)
    axis = 3 - dim
    b = np.delete(b, 0, axis=axis)   # the parts differ along dim

    def build(ctx, x, y):   # a read through a double transpose (strided), b as stored
        x = ops.transpose(ctx, ops.cont(ctx, ops.transpose(ctx, x)))
        return kernels.concat_f32(ctx, x, y, dim)
    check(build, [a, b], lambda x, y: np.concatenate([x, y], axis=axis))


@pytest.mark.parametrize("shape,perm", [((37, 70), (1, 0, 2, 3)), ((3, 40, 33), (1, 0, 2, 3)),
                                        ((2, 3, 5, 7), (0, 2, 1, 3)), ((2, 3, 5, 7), (2, 0, 3, 1))])
def test_concat_f32_reads_transposed_and_permuted_parts(check, shape, perm):
    x = _rand(*shape)
    nd = len(shape)
    # GGML's permute puts source dimension i at perm[i]: numpy axis a of the view is the source's axis
    # nd-1-j where perm[j] = nd-1-a (dimensions past nd stay where they are)
    axes = [nd - 1 - list(perm).index(nd - 1 - a) for a in range(nd)]
    view = np.transpose(x, axes)

    def build(ctx, t):
        v = ops.permute(ctx, t, *perm)
        return kernels.concat_f32(ctx, v, v, 3 if nd == 4 else 2)
    check(build, [x], lambda t: np.stack([view, view]) if nd == 2 else np.concatenate([view, view], axis=0))


@pytest.mark.parametrize("n", [1, 16, 130])
def test_layer_norm_f32_and_its_gradient_match_float64(check, isa, n):
    x = (np.random.default_rng(n).standard_normal((5, n)) * 3 + 1).astype(np.float32)
    g = np.random.default_rng(n + 1).standard_normal((5, n)).astype(np.float32)
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    r = 1 / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    y = (x64 - x64.mean(-1, keepdims=True)) * r
    dx = r * (g64 - g64.mean(-1, keepdims=True) - y * (g64 * y).mean(-1, keepdims=True))
    check(lambda ctx, t: kernels.layer_norm_f32(ctx, t, 1e-5), [x], lambda t: y.astype(np.float32),
          atol=2e-6, rtol=1e-5)
    check(lambda ctx, gt, t: kernels.layer_norm_back_f32(ctx, gt, t, 1e-5), [g, x],
          lambda gt, t: dx.astype(np.float32), atol=2e-6, rtol=1e-5)



@pytest.mark.parametrize("n", [1, 16, 130])
def test_layer_norm_affine_f32_has_the_bits_of_the_core_a_mul_and_an_add(run, isa, n):
    x = (np.random.default_rng(n).standard_normal((5, n)) * 3 + 1).astype(np.float32)
    w, b = _rand(n, seed=1), _rand(n, seed=2)
    fused, _ = run(lambda ctx, t, wt, bt: kernels.layer_norm_affine_f32(ctx, t, wt, bt, 1e-5), [x, w, b])
    apart, _ = run(lambda ctx, t, wt, bt: ops.add(ctx, ops.mul(ctx, kernels.layer_norm_f32(ctx, t, 1e-5), wt), bt),
                   [x, w, b])
    np.testing.assert_array_equal(fused[0].view(np.uint32), apart[0].view(np.uint32))
    ctx = gg.Context(n_tensors=8)
    with pytest.raises(ShapeError, match="layer_norm_affine_f32: w ne"):
        kernels.layer_norm_affine_f32(ctx, ctx.new_tensor("f32", (n, 2)), ctx.new_tensor("f32", (n + 1,)),
                                      ctx.new_tensor("f32", (n,)), 1e-5)


def _adamw(build, w, g, m, v, params, *check):
    """(w, m, v) after one step of `build(ctx, w, g, m, v, params, *check)` on the CPU."""
    ctx = gg.Context(n_tensors=16)
    arrays = (w, g, m, v, params) + check
    ts = [ctx.new_tensor("f32", (len(a),)) for a in arrays]
    gg.lib.ggml_set_param(ts[0].ptr)   # GGML's opt_step_adamw updates only tensors flagged as parameters
    out = build(ctx, *ts)
    keep = gg.alloc_context_tensors(ctx, gg.cpu().buffer_type)
    for t, a in zip(ts, arrays):
        gg.set_data(t, a)
    sched = gg.Scheduler("cpu", graph_size=16)
    graph = gg.Graph(16)
    graph.build_forward_expand(out)
    sched.alloc(graph)
    sched.compute(graph)
    result = [gg.get_data(t).reshape(-1) for t in (ts[0], ts[2], ts[3])]
    del keep
    return result


@pytest.mark.parametrize("n", [5, 16, 1000])
def test_adamw_f32_matches_ggmls_opt_step_adamw(isa, n):
    rng = np.random.default_rng(n)
    w, g = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    m, v = rng.standard_normal(n).astype(np.float32) * 0.1, rng.random(n).astype(np.float32) * 0.1
    params = np.array([1e-3, 0.9, 0.999, 1e-8, 0.1, 1 / (1 - 0.9 ** 3), 1 / (1 - 0.999 ** 3)], np.float32)
    ours = _adamw(kernels.adamw_f32, w, g, m, v, params)
    ggml = _adamw(ops.opt_step_adamw, w, g, m, v, params)
    for a, b in zip(ours, ggml):   # fused multiply-adds round differently: ~1e-9 where w nearly cancels
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)
    # a skipped step (the GradScaler's guard: g -0, beta1 = beta2 = 1, lr 0, eps 1) leaves all three bitwise
    skip = np.array([0.0, 1.0, 1.0, 1.0, 0.1, 1.0, 1.0], np.float32)
    for a, b in zip(_adamw(kernels.adamw_f32, w, np.full(n, -0.0, np.float32), m, v, skip), (w, m, v)):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_adamw_f32_skips_where_its_check_is_nan():
    """With skip_if_nan (a GradScaler's check) the step is the plain one where the check is a number, and changes
    nothing, bit for bit, where it is nan, whatever the gradient holds."""
    rng = np.random.default_rng(0)
    n = 37
    w, m, v = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32), \
        rng.random(n).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    params = np.array([1e-3, 0.9, 0.999, 1e-8, 0.1, 1 / (1 - 0.9 ** 3), 1 / (1 - 0.999 ** 3)], np.float32)
    plain = _adamw(kernels.adamw_f32, w, g, m, v, params)
    checked = _adamw(kernels.adamw_f32, w, g, m, v, params, np.array([0.0], np.float32))
    for a, b in zip(checked, plain):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    g[::3] = np.inf
    g[1::3] = np.nan
    for check in (np.nan, -np.nan):
        skipped = _adamw(kernels.adamw_f32, w, g, m, v, params, np.array([check], np.float32))
        for a, b in zip(skipped, (w, m, v)):
            np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    ctx = gg.Context(n_tensors=8)
    ts = [ctx.new_tensor("f32", (n,)) for _ in range(4)]
    with pytest.raises(ShapeError, match="adamw_f32: skip_if_nan must hold one value"):
        kernels.adamw_f32(ctx, *ts, ctx.new_tensor("f32", (7,)), ctx.new_tensor("f32", (2,)))


def _nonfinite_on_threads(arrays, threads):
    """nonfinite_f32's slots over the f32 `arrays` computed at `threads` threads."""
    return _on_threads(kernels.nonfinite_f32, arrays, threads)[0]


@pytest.mark.parametrize("threads", [1, 3, 8])
@pytest.mark.parametrize("bad", [None, np.inf, -np.inf, np.nan])
def test_nonfinite_f32_sums_to_nan_exactly_where_an_element_is_not_finite(threads, bad):
    """The slots' sum is nan where one element of one of up to nine sources (any sizes, one of 1 element) is
    an inf or a nan, and 0 otherwise (the largest finite floats included: no overflow of a sum)."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(n).astype(np.float32) for n in (1, 7, 64, 1000, 33, 5, 4096, 2, 129)]
    arrays[3][17] = np.finfo(np.float32).max
    arrays[5][:] = -np.finfo(np.float32).max
    for source in range(len(arrays)) if bad is not None else [None]:
        given = [a.copy() for a in arrays]
        if source is not None:
            given[source][-1] = bad
        slots = _nonfinite_on_threads(given, threads)
        assert slots.shape == (kernels.NONFINITE_SLOTS,)
        assert np.isnan(slots.sum()) == (source is not None), (source, slots)
        assert np.all((slots == 0) | np.isnan(slots))


def test_nonfinite_f32_rejects_bad_sources():
    ctx = gg.Context(n_tensors=16)
    with pytest.raises(ShapeError, match="nonfinite_f32: takes 1 to 9 tensors, got 0"):
        kernels.nonfinite_f32(ctx, [])
    with pytest.raises(ShapeError, match="takes 1 to 9 tensors, got 10"):
        kernels.nonfinite_f32(ctx, [ctx.new_tensor("f32", (3,)) for _ in range(10)])
    with pytest.raises(DTypeError, match="nonfinite_f32"):
        kernels.nonfinite_f32(ctx, [ctx.new_tensor("f16", (3,))])
    t = ctx.new_tensor("f32", (4, 3))
    with pytest.raises(ShapeError, match="must be contiguous"):
        kernels.nonfinite_f32(ctx, [gg.GTensor(gg.lib.ggml_transpose(ctx.ptr, t.ptr), ctx)])


def test_packing_buffers_are_freed_with_their_thread():
    # each thread that computes a product packs into buffers of its own (~0.3 MiB here); a thread that
    # ends frees them (GGML's own thread pool may start new threads for every graph). Kept, 60 threads
    # would leave ~16 MiB behind. In a subprocess: the resident size of this process says little. One
    # malloc arena, and a first 60 threads before measuring: glibc's per-thread arenas otherwise grow the
    # resident size by up to ~6 MiB over the first threads with nothing leaked (CI saw 6.3).
    if not os.path.exists("/proc/self/statm"):
        pytest.skip("needs /proc/self/statm (Linux)")
    code = """
import threading, ggrad
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
ggrad.set_num_threads(1)
a, b = ggrad.randn(256, 256), ggrad.randn(256, 256)
def work():
    (a @ b.t()).numpy()
def threads(n):
    for _ in range(n):
        t = threading.Thread(target=work)
        t.start()
        t.join()
threads(60)
before = rss()
threads(60)
print(rss() - before)
"""
    env = dict(os.environ, MALLOC_ARENA_MAX="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout.strip().splitlines()[-1]) < 6.0


@pytest.mark.parametrize("classes,ignore_index", [(1, -100), (10, -100), (10, 3), (10, 0), (50000, 49999)])
def test_class_labels_f32_matches_numpy(check, classes, ignore_index):
    rows = 37
    index = np.random.default_rng(classes).integers(0, classes, rows).astype(np.int32)
    index[::5] = ignore_index
    want = np.zeros((rows, classes), np.float32)
    kept = index != ignore_index
    want[np.arange(rows)[kept], index[kept]] = 1.0
    check(lambda ctx, t: kernels.class_labels_f32(ctx, t, classes, ignore_index), [index], lambda t: want,
          atol=0, rtol=0)


def test_class_labels_f32_rejects_bad_operands():
    ctx = gg.Context(n_tensors=8)
    with pytest.raises(ShapeError, match="class_labels_f32"):
        kernels.class_labels_f32(ctx, ctx.new_tensor("f32", (5,)), 3, -100)
    with pytest.raises(ShapeError, match="class_labels_f32"):
        kernels.class_labels_f32(ctx, ctx.new_tensor("i32", (5, 2)), 3, -100)
    with pytest.raises(ValueError, match="classes"):
        kernels.class_labels_f32(ctx, ctx.new_tensor("i32", (5,)), 0, -100)


@pytest.mark.parametrize("n", [1, 17, 1000])
def test_relu_f32_and_its_gradient_match_numpy(check, n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    x[::7] = np.nan
    g = np.random.default_rng(n + 1).standard_normal(n).astype(np.float32)
    check(lambda ctx, t: kernels.relu_f32(ctx, t), [x], lambda t: np.where(t < 0, 0, t), atol=0, rtol=0)
    check(lambda ctx, gt, t: kernels.relu_back_f32(ctx, gt, t), [g, x],
          lambda gt, t: np.where((t > 0) | np.isnan(t), gt, 0), atol=0, rtol=0)


def _np_softmax(x, mask, scale):
    v = x.astype(np.float64) * scale + (0.0 if mask is None else mask)
    e = np.exp(v - v.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("shape,mask_shape", [((16, 4, 64, 64), (64, 64)), ((3, 2, 5, 37), (1, 1, 7, 37)),
                                              ((2, 3, 130), None), ((1, 1, 3), (1, 1, 3, 3)),
                                              ((4, 2, 6, 16), (2, 1, 6, 16))])
def test_softmax_f32_matches_numpy(check, isa, shape, mask_shape):
    rng = np.random.default_rng(len(shape))
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    inputs, mask = [x], None
    if mask_shape is not None:
        mask = rng.standard_normal(mask_shape).astype(np.float32)
        rows, n = mask_shape[-2:]
        mask[..., np.triu_indices(rows, 1, n)[0], np.triu_indices(rows, 1, n)[1]] = -np.inf   # causal
        inputs.append(mask)
    mask_rows = None
    if mask is not None:   # GGML tiles the mask over the batch dims (index modulo its size)
        m = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)[..., :shape[-2], :]
        lead = (1,) * (4 - len(shape)) + shape[:-2]
        mask_rows = np.tile(m, [a // b for a, b in zip(lead, m.shape[:2])] + [1, 1]).reshape(shape)

    def build(ctx, a, *m):
        return kernels.softmax_f32(ctx, a, m[0] if m else None, 0.7)
    check(build, inputs, lambda *args: _np_softmax(x, mask_rows, 0.7).astype(np.float32), atol=1e-6, rtol=1e-5)


def test_softmax_f32_nan_and_fully_masked_rows_give_nan_rows(check):
    x = np.array([[1.0, np.nan, 2.0], [1.0, 2.0, 3.0], [0.5, 0.5, 0.5]], np.float32)
    mask = np.array([[0, 0, 0], [0, 0, 0], [-np.inf, -np.inf, -np.inf]], np.float32)
    got = check(lambda ctx, a, m: kernels.softmax_f32(ctx, a, m, 1.0), [x, mask],
                lambda a, m: np.array([[np.nan] * 3, _np_softmax(x[1], None, 1.0), [np.nan] * 3], np.float32),
                atol=1e-6, rtol=1e-5)
    assert np.isnan(got[0].reshape(3, 3)[[0, 2]]).all()


def test_softmax_f32_rejects_bad_operands():
    ctx = gg.Context(n_tensors=8)
    a = ctx.new_tensor("f32", (8, 4))
    with pytest.raises(ShapeError, match="softmax_f32"):
        kernels.softmax_f32(ctx, ops.transpose(ctx, a), None, 1.0)
    with pytest.raises(DTypeError, match="softmax_f32"):
        kernels.softmax_f32(ctx, a, ctx.new_tensor("f16", (8, 4)), 1.0)
    with pytest.raises(ShapeError, match="softmax_f32"):
        kernels.softmax_f32(ctx, a, ctx.new_tensor("f32", (8, 3)), 1.0)


def _halves(*shape, seed=0):
    """Values that float16 and bfloat16 hold exactly (quarters up to +-2), so products are exact in float32."""
    return (np.random.default_rng(seed).integers(-8, 9, shape) / 4).astype(np.float32)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (7, 5, 3), (64, 33, 130)])
def test_matmul_half_sums_in_float32(check, dtype, m, n, k):
    a, b = _halves(m, k), _halves(n, k, seed=1)
    check(lambda ctx, x, y: kernels.matmul_half(ctx, x, y), [(a, dtype), (b, dtype)], lambda x, y: y @ x.T)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("transpose_a,transpose_b", [(True, False), (False, True), (True, True)])
def test_matmul_half_reads_transposed_views_in_place(check, dtype, transpose_a, transpose_b):
    a, b = _halves(20, 30), _halves(12, 30, seed=1)
    a_in = a.T.copy() if transpose_a else a
    b_in = b.T.copy() if transpose_b else b

    def build(ctx, x, y):
        return kernels.matmul_half(ctx, ops.transpose(ctx, x) if transpose_a else x,
                                   ops.transpose(ctx, y) if transpose_b else y)
    check(build, [(a_in, dtype), (b_in, dtype)], lambda x, y: b @ a.T)


@pytest.mark.parametrize("a_batch", [(1, 1), (2, 1), (4, 3)])
def test_matmul_half_broadcasts_a_over_b_batches(check, a_batch):
    """a's batch dims divide b's: a batch of one for all (one strided batch on CUDA), or a repeated
    group as grouped-query attention has (one product per batch there)."""
    a, b = _halves(a_batch[1], a_batch[0], 6, 10), _halves(3, 4, 5, 10, seed=1)

    def ref(x, y):
        reps = (3 // a_batch[1], 4 // a_batch[0])
        return y @ np.repeat(np.repeat(x, reps[0], axis=0), reps[1], axis=1).swapaxes(-1, -2)
    check(lambda ctx, x, y: kernels.matmul_half(ctx, x, y), [(a, "f16"), (b, "f16")], ref)


def test_matmul_half_refuses_what_it_cannot_read():
    ctx = gg.Context(n_tensors=16)
    h = ctx.new_tensor("f16", (8, 4))
    with pytest.raises(DTypeError, match="matmul_half"):
        kernels.matmul_half(ctx, h, ctx.new_tensor("f32", (8, 4)))
    with pytest.raises(DTypeError, match="matmul_half"):
        kernels.matmul_half(ctx, ctx.new_tensor("bf16", (8, 4)), h)
    with pytest.raises(ShapeError, match="ne\\[0\\]"):
        kernels.matmul_half(ctx, h, ctx.new_tensor("f16", (9, 4)))
    permuted = ops.permute(ctx, ctx.new_tensor("f16", (8, 4, 3)), 2, 0, 1, 3)   # no contiguous rows or columns
    with pytest.raises(ShapeError, match="contiguous rows or columns"):
        kernels.matmul_half(ctx, permuted, ctx.new_tensor("f16", (4, 5, 8)))
