"""Per-backend lowering: the GPU choices give the CPU choices' results (run on the CPU by forcing them),
and each backend gets the choices lowering.py documents."""

import contextlib

import numpy as np
import pytest

import ggrad
from ggrad import nn
from ggrad.autograd import execution, lowering, memory
from gradcheck import check

GPU_LIKE = lowering.CUDA


@pytest.fixture
def gpu_choices():
    with execution.forced_lowering(ggrad.device("cpu"), GPU_LIKE):
        yield


def _profile_ops(fn):
    with ggrad.profile() as prof:
        fn()
    return set(prof.by_op())


def test_backends_get_their_choices():
    cpu = ggrad.device("cpu")
    assert lowering.for_device(cpu) is lowering.CPU
    with execution.forced_lowering(cpu, GPU_LIKE):
        assert lowering.for_device(cpu) is GPU_LIKE
    assert lowering.for_device(cpu) is lowering.CPU
    assert lowering.CUDA.weight_grad == "out_prod" and lowering.CUDA.reduce_leading == "out_prod"
    assert lowering.VULKAN.reduce_leading == "sum_rows"
    assert not lowering.VULKAN.fused_cross_entropy   # no Vulkan kernel in GGML 0.20.2
    assert lowering.VULKAN.weight_grad == "mul_mat"   # Vulkan's out_prod kernel is slow
    # ggrad's CUDA twins, where the CUDA backend runs them: half products, GELU and layer norm
    twins = lowering.CUDA_TWINS
    assert (twins.half_matmul, twins.gelu_tanh, twins.layer_norm) == ("kernel", "half_kernel", "kernel")
    assert lowering.CUDA.half_matmul == "mul_mat" and lowering.CPU.half_matmul == "mul_mat"


@pytest.mark.parametrize("choices", [lowering.CUDA, lowering.VULKAN], ids=["out_prod", "sum_rows"])
@pytest.mark.parametrize("shapes", [((6, 5), (5,)), ((2, 3, 4), (3, 4)), ((2, 3, 4), (1, 1, 4)), ((4, 3), (1, 3))])
def test_bias_gradient_by_the_gpu_reductions(choices, shapes):
    a, b = shapes
    rng = np.random.default_rng(0)
    with execution.forced_lowering(ggrad.device("cpu"), choices):
        check(lambda x, y: x + y, lambda x, y: x + y, [rng.standard_normal(a), rng.standard_normal(b)])
        # twice differentiable: the reduction's own backward
        check(lambda x, y: (x + y) * (x + y), lambda x, y: (x + y) * (x + y),
              [rng.standard_normal(a), rng.standard_normal(b)])


def _bias_step():
    x = ggrad.randn(8, 5, requires_grad=True)
    bias = ggrad.randn(5, requires_grad=True)
    with ggrad.profile() as prof:
        ((x + bias) * 2.0).sum().backward()
        bias.grad.numpy()
    return prof.by_op()


def test_sum_rows_lowering_is_used():
    with execution.forced_lowering(ggrad.device("cpu"), lowering.VULKAN):
        ops = _bias_step()
    assert "SUM_ROWS" in ops and "REPEAT_BACK" not in ops


def test_out_prod_bias_reduction_needs_no_copy(gpu_choices):
    ops = _bias_step()
    assert "OUT_PROD" in ops and not set(ops) & {"SUM_ROWS", "REPEAT_BACK"}, ops
    assert "CONT" not in ops, ops   # nor a copy of the held gradient: out_prod gives the bias's own shape


def test_half_bias_gradient_under_out_prod_choice(gpu_choices, monkeypatch):
    """CUDA has no f16 out_prod: a float16 bias gradient never reaches out_prod in float16, and equals
    the CPU choice's."""
    from ggrad import ggml
    real = ggml.ops.out_prod
    built = []
    monkeypatch.setattr(ggml.ops, "out_prod", lambda ctx, a, b: built.append((a.dtype, b.dtype)) or real(ctx, a, b))
    rng = np.random.default_rng(5)
    x_np, b_np = rng.standard_normal((6, 4)).astype(np.float16), rng.standard_normal(4).astype(np.float16)

    def bias_grad():
        x = ggrad.tensor(x_np, requires_grad=True)
        b = ggrad.tensor(b_np, requires_grad=True)
        ((x + b) * x).sum().backward()
        return b.grad
    got = bias_grad()
    assert got.dtype is ggrad.float16
    got = got.numpy()
    assert all(types == (ggml.f32, ggml.f32) for types in built), built
    with execution.forced_lowering(ggrad.device("cpu"), lowering.CPU):
        want = bias_grad().numpy()
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3, atol=1e-3)


def test_weight_gradient_by_out_prod(gpu_choices):
    rng = np.random.default_rng(1)
    check(lambda x, w: ggrad.linear(x, w), lambda x, w: x @ w.T, [rng.standard_normal((7, 5)),
                                                                   rng.standard_normal((3, 5))])
    check(lambda x, w: x @ w, lambda x, w: x @ w, [rng.standard_normal((2, 4, 5)), rng.standard_normal((2, 5, 3))])


def test_out_prod_lowering_is_used_and_matches_cpu_choice():
    ggrad.manual_seed(0)
    layer = nn.Linear(6, 4)
    x = ggrad.randn(9, 6)

    def weight_grad():
        layer.zero_grad()
        layer(x).sum().backward()
        return layer.weight.grad.numpy()

    on_cpu = weight_grad()
    with execution.forced_lowering(ggrad.device("cpu"), GPU_LIKE):
        assert "OUT_PROD" in _profile_ops(weight_grad)
        np.testing.assert_allclose(weight_grad(), on_cpu, rtol=1e-5, atol=1e-6)


def test_forced_choices_hold_for_a_graph_begun_before_the_block(no_graph_cache):
    """A graph's lowering is fixed by its first use; `forced` computes the pending work on entry and on exit,
    so a graph begun before the block is not built half under the forced choices: the Tensor-level rules
    (Linear's backward picks its gradient ops) and the graph's own nodes follow one lowering."""
    from ggrad.autograd import execution
    ggrad.manual_seed(0)
    layer = nn.Linear(6, 4)
    x = ggrad.randn(9, 6)
    cpu = ggrad.device("cpu")
    before = x * 2.0   # pending: the graph is under way, under the CPU's choices
    assert not memory.pending_graph(cpu).is_empty()
    with execution.forced_lowering(cpu, GPU_LIKE):
        assert memory.pending_graph(cpu).is_empty()   # `before` was computed on entry
        with ggrad.profile() as prof:
            layer(before).sum().backward()
            got = layer.weight.grad.numpy()
        assert "OUT_PROD" in set(prof.by_op())
    assert memory.pending_graph(cpu).is_empty()   # computed on exit
    np.testing.assert_allclose(got, np.ones((4, 1)) * before.numpy().sum(0), rtol=1e-5)


def test_double_backward_through_out_prod(gpu_choices):
    rng = np.random.default_rng(2)
    w = ggrad.tensor(rng.standard_normal((3, 5)).astype(np.float32), requires_grad=True)
    x = ggrad.tensor(rng.standard_normal((4, 5)).astype(np.float32), requires_grad=True)
    ggrad.linear(x, w).sum().backward(create_graph=True)
    gw = w.grad                           # = 1^T x, as a function of x
    (gw * gw).sum().backward()
    # x.grad: the first backward's 1 @ w, plus d/dx sum((1^T x)^2) = 1 @ (2 * 1^T x)
    ones = np.ones((4, 3))
    expected = ones @ w.detach().numpy() + 2 * ones @ (ones.T @ x.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("choices", ["VULKAN", "RPC"])
def test_composed_cross_entropy_where_a_backend_may_lack_the_fused_one(choices):
    # Vulkan has no kernel; an RPC server may be a Vulkan one, and would compute the op as nothing
    logits = ggrad.randn(6, 4, requires_grad=True)
    y = ggrad.tensor(np.array([0, 1, 2, 3, 0, 1]))
    with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, choices)):
        ops = _profile_ops(lambda: ggrad.cross_entropy(logits, y).backward() or logits.grad.numpy())
    assert "CROSS_ENTROPY_LOSS" not in ops


@pytest.mark.parametrize("choices", [lowering.CUDA, lowering.CUDA_TWINS, lowering.VULKAN])
def test_gpt_training_is_the_same_under_gpu_choices(choices):
    from ggrad import optim
    from ggrad.examples.char_gpt import CharGPT
    rng = np.random.default_rng(3)
    x = rng.integers(0, 20, (2, 8)).astype(np.int32)
    y = rng.integers(0, 20, (2 * 8,)).astype(np.int32)

    def losses():
        ggrad.manual_seed(0)
        model = CharGPT(20, 16, 2, 2, 8)
        opt = optim.AdamW(model.parameters(), lr=1e-2)
        out = []
        for _ in range(3):
            loss = ggrad.cross_entropy(model(ggrad.tensor(x)).reshape(-1, 20), ggrad.tensor(y))
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out

    reference = losses()
    with execution.forced_lowering(ggrad.device("cpu"), choices):
        np.testing.assert_allclose(losses(), reference, rtol=1e-4)


def test_row_max_under_gpu_choices(gpu_choices):
    rng = np.random.default_rng(4)
    check(lambda x: ggrad.amax(x, -1), lambda x: x.max(-1), [rng.standard_normal((3, 4, 5))])
    check(lambda x: ggrad.log_softmax(x, -1), lambda x: x - np.log(np.exp(x).sum(-1, keepdims=True)),
          [rng.standard_normal((6, 7))])


def test_the_graph_cache_does_not_replay_nodes_built_under_another_lowering():
    # the same recorded step under the CPU's choices, then under the GPU's: the second must build its own
    # nodes (no REPEAT_BACK), not replay the cached CPU graph
    ggrad.manual_seed(0)
    x = ggrad.randn(8, 5, requires_grad=True)
    bias = ggrad.randn(5, requires_grad=True)

    def step():
        x.grad = bias.grad = None
        loss = ggrad.nn.functional.log_softmax(x + bias, dim=-1).sum()
        loss.backward()
        return loss.item(), bias.grad.numpy().copy()

    cpu = ggrad.device("cpu")
    step()
    with ggrad.profile() as prof:
        expected = step()
    assert "REPEAT_BACK" in set(prof.by_op())
    with execution.forced_lowering(cpu, GPU_LIKE):
        with ggrad.profile() as prof:
            got = step()
        ops = set(prof.by_op())
    assert "REPEAT_BACK" not in ops and "SUM_ROWS" in ops
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape, dims", [((64, 48), (1, 0)), ((7, 5), (1, 0)), ((9, 6), (1, 0)),
                                         ((3, 4, 6, 5), (0, 1, 3, 2)), ((2, 6, 5, 8), (0, 2, 3, 1)),
                                         ((4, 3, 8), (0, 2, 1))],
                         ids=["2d-slabs", "2d-odd", "2d-no-slabs", "4d-transpose", "4d-permute", "3d"])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_transposed_copy_matches_numpy(shape, dims, dtype):
    from ggrad.autograd.pending import contiguous_node, _transposed
    import ggrad.ggml as gg
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype(np.float32 if dtype == "f32" else np.float16)
    ctx = gg.Context(n_tensors=64)
    src = ctx.new_tensor(dtype, tuple(reversed(shape)))
    axes = [len(shape) - 1 - d for d in reversed(dims)]          # numpy transpose -> GGML permute
    perm = [axes.index(i) for i in range(len(shape))] + list(range(len(shape), 4))
    view = gg.ops.permute(ctx, gg.ops.reshape_4d(ctx, src, *src.ne), *perm)
    assert _transposed(view)
    out = contiguous_node(ctx, view, transpose_by_concat=True)
    assert out.is_contiguous and list(out.ne) == list(view.ne)
    keep = gg.alloc_context_tensors(ctx, gg.cpu().buffer_type)  # noqa: F841
    gg.set_data(src, a)
    graph = gg.Graph(64)
    graph.build_forward_expand(out)
    sched = gg.Scheduler("cpu", graph_size=64)
    sched.alloc(graph)
    sched.compute(graph)
    want = np.ascontiguousarray(a.transpose(dims))
    np.testing.assert_array_equal(gg.get_data(out).reshape(want.shape), want)


def test_transposed_matmul_operands_by_kernel_concat_or_cont(no_graph_cache):
    # the CPU's kernel reads them in place; mul_mat takes copies: by concat (RPC) or by cont (GPUs)
    torch = pytest.importorskip("torch")
    assert lowering.CPU.transpose_copy == lowering.RPC.transpose_copy == "concat"
    assert lowering.CUDA.transpose_copy == lowering.VULKAN.transpose_copy == "cont"
    assert lowering.CPU.matmul == "kernel" and lowering.RPC.matmul == "mul_mat"
    x = ggrad.randn(16, 12, requires_grad=True)
    w = ggrad.randn(10, 12, requires_grad=True)
    copies = {}
    for name in ("CPU", "RPC", "VULKAN"):
        choices = getattr(lowering, name)
        with execution.forced_lowering(ggrad.device("cpu"), choices):
            x.grad = w.grad = None
            with ggrad.profile() as prof:
                (x @ w.t()).square().sum().backward()
                w.grad.numpy()
        by_op = prof.by_op()
        copies[name] = {op: by_op[op][0] for op in ("CONT", "CONCAT") if op in by_op}
        assert ("MATMUL_F32" in by_op) == (choices.matmul == "kernel")
    # one copy is not the products': w.t()'s gradient laid out as w
    assert copies == {"CPU": {"CONT": 1}, "RPC": {"CONT": 1, "CONCAT": 3}, "VULKAN": {"CONT": 4}}
    xt = torch.tensor(x.numpy(), requires_grad=True)
    wt = torch.tensor(w.numpy(), requires_grad=True)
    (xt @ wt.t()).square().sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-4)


def _ops_of(fn):
    with ggrad.profile() as prof:
        fn().numpy()
    return set(prof.by_op())


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_column_broadcast_by_out_prod_matches_repeat(op, no_graph_cache):
    rng = np.random.default_rng(1)
    a_np = rng.standard_normal((3, 5, 7)).astype(np.float32)
    b_np = rng.uniform(0.5, 2.0, (3, 5, 1)).astype(np.float32)
    fn = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "div": lambda a, b: a / b}[op]
    results = {}
    for name, choices in (("out_prod", lowering.CPU), ("repeat", lowering.VULKAN)):
        with execution.forced_lowering(ggrad.device("cpu"), choices):
            a = ggrad.tensor(a_np, requires_grad=True)
            b = ggrad.tensor(b_np, requires_grad=True)
            ops_run = _ops_of(lambda: fn(a, b))
            assert ("OUT_PROD" in ops_run) == (name == "out_prod")
            (fn(a, b) * fn(a, b)).sum().backward()
            results[name] = (fn(a, b).numpy(), a.grad.numpy(), b.grad.numpy())
    for got, want in zip(results["out_prod"], results["repeat"]):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # and against the numerical gradient, with the CPU's choice
    check(fn, fn, [a_np.astype(np.float64), b_np.astype(np.float64)])


@pytest.mark.parametrize("shape", [(4, 128), (2, 3, 37), (1, 1000)])
def test_row_sums_by_mul_mat_match_sum_rows(shape, no_graph_cache):
    x_np = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    x = ggrad.tensor(x_np)
    with execution.forced_lowering(ggrad.device("cpu"), lowering.VULKAN):
        assert "SUM_ROWS" in _ops_of(lambda: x.sum(-1))
        want = x.sum(-1, keepdim=True).numpy()
    assert "SUM_ROWS" not in _ops_of(lambda: x.sum(-1))
    np.testing.assert_allclose(x.sum(-1, keepdim=True).numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(want, x_np.astype(np.float64).sum(-1, keepdims=True), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("choices,ops_wanted", [("CPU", {"LAYER_NORM_BACK_F32"}),
                                                ("CUDA_TWINS", {"LAYER_NORM_BACK_F32"}),
                                                ("RPC", {"MUL_MAT", "OUT_PROD", "RMS_NORM_BACK"})])
def test_layer_norm_backward_by_the_cpu_choices_matches_torch(no_graph_cache, choices, ops_wanted):
    # the CPU's kernel; RPC's composition: row sums by mul_mat, the row means written out by out_prod
    # before the subtraction
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x_np = rng.standard_normal((4, 6, 32)).astype(np.float32) * 3 + 1
    g_np = rng.standard_normal((4, 6, 32)).astype(np.float32)
    with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, choices)):
        x = ggrad.tensor(x_np, requires_grad=True)
        y = ggrad.nn.functional.layer_norm(x, (32,))
        with ggrad.profile() as prof:
            (y * ggrad.tensor(g_np)).sum().backward()
            x.grad.numpy()
    ops_run = set(prof.by_op())
    xt = torch.tensor(x_np, requires_grad=True)
    (torch.nn.functional.layer_norm(xt, (32,)) * torch.tensor(g_np)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    assert "SUM_ROWS" not in ops_run and ops_wanted <= ops_run


@pytest.mark.parametrize("choices,op", [("CPU", "GELU_TANH_F32"), ("CUDA_TWINS", "GELU_TANH_F32"),
                                        ("VULKAN_SHADERS", "GELU_TANH_F32"), ("RPC", "SILU")])
def test_gelu_tanh_on_the_cpu_is_float32_exact_as_torch(no_graph_cache, choices, op):
    # the CPU's kernel and the composition RPC servers take; GGML's own gelu reads an f16 table (errors
    # near 4e-3 here)
    torch = pytest.importorskip("torch")
    finite = np.linspace(-30, 30, 6001, dtype=np.float32)
    x_np = np.concatenate([finite, np.array([np.inf, -np.inf, np.nan, 1e20, -1e20, 1e13, -1e13, 20.0, -20.0],
                                            dtype=np.float32)])
    with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, choices)):
        x = ggrad.tensor(x_np)
        assert op in _ops_of(lambda: ggrad.nn.functional.gelu(x, approximate="tanh"))
        got = ggrad.nn.functional.gelu(x, approximate="tanh").numpy()
        want = torch.nn.functional.gelu(torch.tensor(x_np), approximate="tanh").numpy()
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6, equal_nan=True)
        xg = ggrad.tensor(finite, requires_grad=True)
        ggrad.nn.functional.gelu(xg, approximate="tanh").sum().backward()
        xt = torch.tensor(finite, requires_grad=True)
        torch.nn.functional.gelu(xt, approximate="tanh").sum().backward()
        np.testing.assert_allclose(xg.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
        check(lambda t: ggrad.nn.functional.gelu(t, approximate="tanh"),
              lambda t: 0.5 * t * (1 + np.tanh(np.sqrt(2 / np.pi) * (t + 0.044715 * t ** 3))),
              [np.random.default_rng(4).standard_normal((3, 7)) * 3])


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_half_gelu_kernels_round_once_as_torch(no_graph_cache, name):
    """Under CUDA's twins GELU of a half tensor computes in its dtype (gelu_tanh_half and its gradient, no
    cast around them): each value f32 math rounded once, as PyTorch's GELU of a half tensor (one unit in
    the last place apart at most: another order of the f32 math). A recorded backward (create_graph)
    computes in f32 and rounds once too; the CPU's own lowering keeps the f32 kernels."""
    torch = pytest.importorskip("torch")
    dtype, tdtype = getattr(ggrad, name), getattr(torch, name)
    finite = np.linspace(-12, 12, 4001, dtype=np.float32)
    x_np = np.concatenate([finite, np.array([np.inf, -np.inf, np.nan, 6e4, -6e4, 0.0], dtype=np.float32)])
    g_np = np.random.default_rng(3).standard_normal(x_np.shape).astype(np.float32)
    xt = torch.tensor(x_np).to(tdtype).requires_grad_()
    yt = torch.nn.functional.gelu(xt, approximate="tanh")
    yt.backward(torch.tensor(g_np).to(tdtype))
    unit = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}[name]
    for choices, ops_wanted in (("CUDA_TWINS", {"GELU_TANH_HALF", "GELU_TANH_BACK_HALF"}),
                                ("CPU", {"GELU_TANH_F32", "GELU_TANH_BACK_F32", "CPY"})):
        with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, choices)):
            x = ggrad.tensor(x_np).to(dtype).requires_grad_()
            g = ggrad.tensor(g_np).to(dtype)
            ggrad.realize()
            with ggrad.profile() as prof:
                y = ggrad.nn.functional.gelu(x, approximate="tanh")
                y.backward(g)
                ggrad.realize()
            ran = set(prof.by_op())
            assert ops_wanted <= ran and (choices == "CPU") == ("CPY" in ran), (choices, ran)
            assert y.dtype is dtype and x.grad.dtype is dtype
            np.testing.assert_allclose(y.float().numpy(), yt.float().detach().numpy(), rtol=unit, atol=1e-6,
                                       equal_nan=True)
            # PyTorch's gradient at +-inf is nan, as the kernels'; in the far negative tail its 1 + tanh(u)
            # cancels in f32 (absolute errors near 1e-6 there, the kernels' closer to the f64 value)
            finite_grads = slice(0, finite.size)
            np.testing.assert_allclose(x.grad.float().numpy()[finite_grads], xt.grad.float().numpy()[finite_grads],
                                       rtol=2 * unit, atol=4e-6)
    with execution.forced_lowering(ggrad.device("cpu"), lowering.CUDA_TWINS):
        x = ggrad.tensor(finite[::40]).to(dtype).requires_grad_()
        dx, = ggrad.autograd.grad(ggrad.nn.functional.gelu(x, approximate="tanh").sum(), x, create_graph=True)
        assert dx.requires_grad and dx.dtype is dtype
        xt = torch.tensor(finite[::40]).to(tdtype).requires_grad_()
        dxt, = torch.autograd.grad(torch.nn.functional.gelu(xt, approximate="tanh").sum(), xt, create_graph=True)
        np.testing.assert_allclose(dx.float().numpy(), dxt.float().detach().numpy(), rtol=2 * unit, atol=1e-6)
        (d2x,) = ggrad.autograd.grad(dx.float().sum(), x)
        (d2xt,) = torch.autograd.grad(dxt.float().sum(), xt)
        np.testing.assert_allclose(d2x.float().numpy(), d2xt.float().numpy(), rtol=8 * unit, atol=4 * unit)


def test_gelu_tanh_kernel_gradient_equals_the_composition_everywhere(no_graph_cache):
    # inf, nan and huge inputs included; a backward that is itself recorded takes the composition
    x_np = np.array([np.inf, -np.inf, np.nan, 1e20, -1e20, 1e13, -1e13, 20.0, -20.0, 0.0, -0.5, 3.0],
                    dtype=np.float32)
    grads = {}
    for choices in ("CPU", "RPC"):
        with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, choices)):
            x = ggrad.tensor(x_np, requires_grad=True)
            ggrad.nn.functional.gelu(x, approximate="tanh").sum().backward()
            grads[choices] = x.grad.numpy()
    np.testing.assert_allclose(grads["CPU"], grads["RPC"], rtol=1e-6, atol=1e-7, equal_nan=True)
    x = ggrad.tensor(x_np[7:], requires_grad=True)
    g, = ggrad.autograd.grad(ggrad.nn.functional.gelu(x, approximate="tanh").sum(), x, create_graph=True)
    assert g.requires_grad
    np.testing.assert_allclose(g.numpy(), grads["CPU"][7:], rtol=1e-6, atol=1e-7)


def test_layer_norm_kernel_equals_the_composition_with_double_backward(no_graph_cache):
    # the CPU's kernels (forward and gradient) against GGML's norm and the composed gradient (RPC's
    # choices); a recorded backward (create_graph) takes the composition, so second derivatives exist
    x_np = (np.random.default_rng(7).standard_normal((6, 40)) * 2 + 0.5).astype(np.float32)
    w_np = np.random.default_rng(8).standard_normal(40).astype(np.float32)
    results = {}
    for choices in ("CPU", "RPC"):
        with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, choices)):
            x = ggrad.tensor(x_np, requires_grad=True)
            with ggrad.profile() as prof:
                y = ggrad.nn.functional.layer_norm(x, (40,), ggrad.tensor(w_np))
                g, = ggrad.autograd.grad((y * y).sum(), x, create_graph=True)
                gg, = ggrad.autograd.grad(g.square().sum(), x)
                y.numpy()
            assert ("LAYER_NORM_F32" in prof.by_op()) == (choices == "CPU")
            x2 = ggrad.tensor(x_np, requires_grad=True)
            with ggrad.profile() as prof:
                ggrad.nn.functional.layer_norm(x2, (40,), ggrad.tensor(w_np)).square().sum().backward()
                x2.grad.numpy()
            assert ("LAYER_NORM_BACK_F32" in prof.by_op()) == (choices == "CPU")
            results[choices] = (y.numpy(), g.numpy(), gg.numpy(), x2.grad.numpy())
    for cpu, rpc in zip(results["CPU"], results["RPC"]):
        np.testing.assert_allclose(cpu, rpc, rtol=2e-4, atol=2e-5)


def test_adamw_step_by_kernel_on_the_cpu_and_by_ggml_for_rpc(no_graph_cache):
    torch = pytest.importorskip("torch")
    w_np = np.random.default_rng(5).standard_normal((33, 17)).astype(np.float32)
    results = {}
    for choices, op in (("CPU", "ADAMW_F32"), ("RPC", "OPT_STEP_ADAMW")):
        with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, choices)):
            w = ggrad.nn.Parameter(ggrad.tensor(w_np))
            opt = ggrad.optim.AdamW([w], lr=1e-2, weight_decay=0.1)
            for _ in range(3):
                opt.zero_grad()
                with ggrad.profile() as prof:
                    (w * w).sum().backward()
                    opt.step()
                    w.numpy()
                assert op in prof.by_op()
            results[choices] = w.numpy()
    wt = torch.nn.Parameter(torch.tensor(w_np))
    opt = torch.optim.AdamW([wt], lr=1e-2, weight_decay=0.1)
    for _ in range(3):
        opt.zero_grad()
        (wt * wt).sum().backward()
        opt.step()
    for got in results.values():
        np.testing.assert_allclose(got, wt.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_gelu_and_layer_norm_kernels_at_every_instruction_set(no_graph_cache):
    # each kernel is compiled at every register width (csrc/each_width.h): the CPU's lowering is the same
    # whichever instruction set the kernels run with
    from ggrad.ggml import kernels
    cpu = ggrad.device("cpu")
    best = kernels.isa()
    try:
        for isa in ("avx512", "avx2", "generic"):
            if kernels.isa(isa) != isa:
                continue
            assert lowering.for_device(cpu) is lowering.CPU
            x = ggrad.randn(4, 32, requires_grad=True)

            def step():
                y = ggrad.nn.functional.layer_norm(ggrad.nn.functional.gelu(x, approximate="tanh") @ x.t(), (4,))
                (y * y).sum().backward()
                return x.grad
            ops_run = _ops_of(step)
            assert {"GELU_TANH_F32", "GELU_TANH_BACK_F32", "LAYER_NORM_F32", "LAYER_NORM_BACK_F32",
                    "MATMUL_F32"} <= ops_run
            assert not {"SILU", "NORM", "RMS_NORM_BACK"} & ops_run
    finally:
        kernels.isa(best)


@pytest.mark.parametrize("choices", ["RPC", "CUDA", "VULKAN"])
@pytest.mark.parametrize("op", ["gelu_tanh", "layer_norm"])
def test_composed_gradients_are_one_recorded_op_of_the_same_nodes(monkeypatch, no_graph_cache, choices, op):
    """Where no kernel takes GELU's or layer norm's gradient, its composition is built as GGML nodes inside
    one recorded op (GeluTanhBack, LayerNormCoreBack): the same nodes, so the same values bit for bit, as the
    composition in Tensor ops that a backward recorded with create_graph takes."""
    from ggrad.autograd.primitive import Primitive
    x_np = (np.random.default_rng(3).standard_normal((5, 24)) * 3).astype(np.float32)
    fn = {"gelu_tanh": lambda t: ggrad.nn.functional.gelu(t, approximate="tanh"),
          "layer_norm": lambda t: ggrad.nn.functional.layer_norm(t, (24,))}[op]
    recorded = []
    record = Primitive._record.__func__

    def counting(cls, ctx, args, tensors):
        recorded.append(cls.__name__)
        return record(cls, ctx, args, tensors)

    with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, choices)):
        x = ggrad.tensor(x_np, requires_grad=True)
        y = fn(x)
        loss = (y * ggrad.tensor(np.linspace(-2, 2, x_np.size, dtype=np.float32).reshape(x_np.shape))).sum()
        monkeypatch.setattr(Primitive, "_record", classmethod(counting))
        one_op, = ggrad.autograd.grad(loss, x, retain_graph=True)
        backward_ops = list(recorded)
        composed, = ggrad.autograd.grad(loss, x, create_graph=True)
    assert backward_ops.count({"gelu_tanh": "GeluTanhBack", "layer_norm": "LayerNormCoreBack"}[op]) == 1
    assert len(backward_ops) <= 3, backward_ops   # the weights' product and the sum's gradient besides
    assert composed.requires_grad
    np.testing.assert_array_equal(one_op.numpy(), composed.detach().numpy())


def test_gelu_tanh_gradient_pairs_its_products_for_cuda_fusion(no_graph_cache):
    """Under CUDA's choices GELU's composed gradient has its last triple product as a pair of MULs, the second
    reading the first as its first source, adjacent in GGML's graph: GGML's CUDA backend runs the pair as
    one kernel (its fusion of MUL chains). The gradient g comes from a product made after the GELU, as in a
    model (it must not land between the pair). (The first triple product is not paired: it cost memory.)"""
    from ggrad.autograd import execution
    from ggrad.ggml import GTensor, ffi
    rng = np.random.default_rng(5)
    computed = []   # (op, node, its first source, dims), read while the graph is alive

    def observe(ptr, ask):
        if not ask:
            computed.append((GTensor(ptr, None).op, int(ffi.cast("uintptr_t", ptr)),
                             int(ffi.cast("uintptr_t", ptr.src[0])), list(ptr.ne)))
        return True

    with execution.forced_lowering(ggrad.device("cpu"), lowering.CUDA):
        x = ggrad.tensor(rng.standard_normal((6, 24)).astype(np.float32), requires_grad=True)
        w = ggrad.tensor(rng.standard_normal((24, 5)).astype(np.float32), requires_grad=True)
        (ggrad.nn.functional.gelu(x, approximate="tanh") @ w).sum().backward()
        previous, execution.eval_hook = execution.eval_hook, observe
        try:
            got = x.grad.numpy()
        finally:
            execution.eval_hook = previous
    pairs = [i for i, (a, b) in enumerate(zip(computed, computed[1:]))
             if a[0] == b[0] == "MUL" and b[2] == a[1] and a[3] == [24, 6, 1, 1]]
    assert len(pairs) == 1, [op for op, *_ in computed]
    torch = pytest.importorskip("torch")
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    (torch.nn.functional.gelu(xt, approximate="tanh") @ torch.tensor(w.detach().numpy())).sum().backward()
    np.testing.assert_allclose(got, xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_vulkan_copies_strided_bfloat16_second_operands(no_graph_cache, monkeypatch):
    # Vulkan's mul_mat reads a strided second operand (src1) only in float32 or float16: bfloat16 attention
    # heads read in place would fall back to the CPU. The copy changes nothing in the result.
    import ggrad.ggml.ops as gops
    rng = np.random.default_rng(4)
    q_np, k_np = (rng.standard_normal((2, 6, 3, 8)).astype(np.float32) for _ in range(2))
    mul_mat = gops.mul_mat
    strided_bf16_second = []

    def recording_mul_mat(ctx, a, b):
        strided_bf16_second.append(b.dtype is ggrad.bfloat16 and not b.is_contiguous)
        return mul_mat(ctx, a, b)

    monkeypatch.setattr(gops, "mul_mat", recording_mul_mat)
    scores = {}
    for choices in (lowering.CUDA, lowering.VULKAN):
        strided_bf16_second.clear()
        with execution.forced_lowering(ggrad.device("cpu"), choices), ggrad.autocast("cpu", dtype=ggrad.bfloat16):
            q, k = (ggrad.tensor(t).bfloat16().transpose(1, 2) for t in (q_np, k_np))   # heads: permuted views
            reads_in_place = choices.strided_matmul == "both"
            scores[reads_in_place] = (q @ k.transpose(-2, -1)).float().numpy()
        assert strided_bf16_second and any(strided_bf16_second) == reads_in_place
    np.testing.assert_array_equal(scores[False], scores[True])


@pytest.mark.parametrize("ignore_index", [-100, 2, 2**40])
@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_class_labels_by_kernel_or_ggml_ops_give_the_same_loss(no_graph_cache, loss, ignore_index):
    # the CPU's kernel (one node) and GGML's elementwise ops (the other backends) make the same labels
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x_np = rng.standard_normal((9, 6)).astype(np.float32)
    y_np = rng.integers(0, 6, 9)
    y_np[[1, 4]] = 2
    fn = getattr(ggrad.nn.functional, loss)
    results = {}
    for choices in ("CPU", "RPC", "CUDA"):
        with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, choices)):
            x = ggrad.tensor(x_np, requires_grad=True)
            ops_run = _ops_of(lambda: fn(x, ggrad.tensor(y_np), ignore_index=ignore_index))
            assert ("CLASS_LABELS_F32" in ops_run) == (choices == "CPU"), ops_run
            out = fn(x, ggrad.tensor(y_np), ignore_index=ignore_index)
            out.backward()
            results[choices] = (out.item(), x.grad.numpy())
    tx = torch.tensor(x_np, requires_grad=True)
    want = getattr(torch.nn.functional, loss)(tx, torch.tensor(y_np), ignore_index=ignore_index)
    want.backward()
    for got, grad in results.values():
        np.testing.assert_allclose(got, want.item(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grad, tx.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("choices", ["CPU", "RPC"])
def test_relu_by_kernel_or_ggml_ops_matches_torch_at_special_values(no_graph_cache, choices):
    # the CPU's kernels (one node each way) and GGML's ops with the nan carried (the other backends):
    # PyTorch's values at nan, -inf, -0 and 0; the kernel's gradient is 0 where x <= 0 even for a nan or
    # infinite g, as PyTorch's, where GGML's ops multiply g by 0 (nan: documented in ReluBack)
    torch = pytest.importorskip("torch")
    x_np = np.array([-0.0, 0.0, np.nan, -np.inf, np.inf, -2.5, 3.0, 1e-30, -1e-30], np.float32)
    g_np = np.array([1.0, 2.0, 3.0, np.nan, 4.0, np.inf, 5.0, 6.0, -np.inf], np.float32)
    if choices != "CPU":
        g_np[~np.isfinite(g_np)] = 7.0
    with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, choices)):
        x = ggrad.tensor(x_np, requires_grad=True)
        ops_run = _ops_of(lambda: ggrad.relu(x))
        assert ("RELU_F32" in ops_run) == (choices == "CPU"), ops_run
        y = ggrad.relu(x)
        y.backward(ggrad.tensor(g_np))
        got_y, got_g = y.detach().numpy(), x.grad.numpy()
    tx = torch.tensor(x_np, requires_grad=True)
    ty = torch.relu(tx)
    ty.backward(torch.tensor(g_np))
    np.testing.assert_array_equal(got_g, tx.grad.numpy())
    if choices == "CPU":   # bit for bit, the sign of -0 too (GGML's relu gives +0)
        np.testing.assert_array_equal(got_y.view(np.uint32), ty.detach().numpy().view(np.uint32))
    else:
        np.testing.assert_array_equal(got_y, ty.detach().numpy())


def test_relu_double_backward_by_the_kernel_matches_torch(no_graph_cache):
    torch = pytest.importorskip("torch")
    x_np = np.array([[-1.0, 2.0, 0.5], [3.0, -0.25, 1.5]], np.float32)
    x = ggrad.tensor(x_np, requires_grad=True)
    (gx,) = ggrad.autograd.grad((ggrad.relu(x) ** 2).sum(), x, create_graph=True)
    (ggx,) = ggrad.autograd.grad((gx * gx).sum(), x)
    tx = torch.tensor(x_np, requires_grad=True)
    (tgx,) = torch.autograd.grad((torch.relu(tx) ** 2).sum(), tx, create_graph=True)
    (tggx,) = torch.autograd.grad((tgx * tgx).sum(), tx)
    np.testing.assert_allclose(gx.detach().numpy(), tgx.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(ggx.numpy(), tggx.numpy(), rtol=1e-6)


@pytest.mark.parametrize("choices", ["CPU", "RPC"])
def test_masked_softmax_by_kernel_or_ggml_matches_torch(no_graph_cache, choices):
    # attention's probabilities: the CPU's kernel (three vector passes a row) or GGML's soft_max_ext
    torch = pytest.importorskip("torch")
    from ggrad.autograd.ops.neural import softmax_ext
    rng = np.random.default_rng(6)
    x_np = rng.standard_normal((2, 3, 5, 21)).astype(np.float32) * 4
    mask_np = np.triu(np.full((5, 21), -np.inf, np.float32), 17) + rng.standard_normal((5, 21)).astype(np.float32)
    g_np = rng.standard_normal(x_np.shape).astype(np.float32)
    with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, choices)):
        x = ggrad.tensor(x_np, requires_grad=True)
        ops_run = _ops_of(lambda: softmax_ext(x, ggrad.tensor(mask_np), 0.3))
        assert ("SOFTMAX_F32" in ops_run) == (choices == "CPU"), ops_run
        y = softmax_ext(x, ggrad.tensor(mask_np), 0.3)
        y.backward(ggrad.tensor(g_np))
        got_y, got_g = y.detach().numpy(), x.grad.numpy()
    tx = torch.tensor(x_np, requires_grad=True)
    ty = torch.softmax(tx * 0.3 + torch.tensor(mask_np), -1)
    ty.backward(torch.tensor(g_np))
    np.testing.assert_allclose(got_y, ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_g, tx.grad.numpy(), rtol=1e-4, atol=1e-6)


def _autocast_gelu_grads(route=True, dtype=ggrad.float16):
    """Gradients of a Linear -> GELU (tanh) -> Linear model on 3-D input under autocast, CUDA's choices."""
    ggrad.manual_seed(0)
    model = ggrad.nn.Sequential(ggrad.nn.Linear(16, 32), ggrad.nn.GELU("tanh"), ggrad.nn.Linear(32, 8))
    x = ggrad.tensor(np.random.default_rng(6).standard_normal((2, 5, 16)).astype(np.float32))
    with execution.forced_lowering(ggrad.device("cpu"), lowering.CUDA):
        with ggrad.autocast("cpu", dtype=dtype or ggrad.float16, enabled=dtype is not None):
            y = model(x)
        y.float().square().sum().backward()
        return [p.grad.numpy() for p in model.parameters()]


def test_autocast_gelu_gradient_reads_the_product_and_a_fresh_cast_not_views(no_graph_cache, monkeypatch):
    """Under autocast GELU keeps its input in half precision and its gradient arrives as a reshape view of
    fc2's 2-D input-gradient product: the composed gradient is built on the product itself and the half
    input cast anew in its shape, which GGML's allocator may overwrite (three activation-sized buffers at
    the peak, not four). The gradients are those of the composition on the views."""
    from ggrad.autograd.ops import unary
    taken = []
    unviewed = unary._unviewed
    monkeypatch.setattr(unary, "_unviewed", lambda c, g, x: taken.append(unviewed(c, g, x)) or taken[-1])
    routed = _autocast_gelu_grads()
    assert taken and all(t is not None for t in taken)
    monkeypatch.setattr(unary, "_unviewed", lambda c, g, x: None)
    plain = _autocast_gelu_grads()
    for a, b in zip(routed, plain):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for a, b in zip(routed, _autocast_gelu_grads(dtype=None)):   # float32: within half precision's rounding
        np.testing.assert_allclose(a, b, rtol=2e-2, atol=2e-2)


BACKEND_LOWERINGS = {"CPU": lowering.CPU, "RPC": lowering.RPC, "CUDA": lowering.CUDA,
                     "CUDA_TWINS": lowering.CUDA_TWINS, "VULKAN": lowering.VULKAN,
                     "VULKAN_SHADERS": lowering.VULKAN_SHADERS}


def test_every_backends_choice_has_a_build():
    """Each Choice (a body the Lowering picks) has one for the value every backend names: a misspelt value in
    a Lowering would otherwise fall to the default silently. (An alternative may serve a forced Lowering only:
    attention="kernel", the CPU's flash kernels under test.)"""
    assert {c.field for c in lowering.CHOICES} >= {"relu", "gelu_tanh", "concat", "class_labels", "adamw",
                                                   "transpose_copy", "row_sum", "column_broadcast", "attention"}
    built = {}   # field -> the values some body is built for
    for c in lowering.CHOICES:
        if c.flags is None:
            built.setdefault(c.field, set()).update(c.builds)
    for c in lowering.CHOICES:
        if c.flags is not None:   # a `names` flag: any other value answers False; its own must be built
            assert set(c.flags) <= built[c.field], (c.field, c.flags)
            continue
        named = {getattr(lw, c.field) for lw in BACKEND_LOWERINGS.values()}
        assert named <= set(c.builds) | {lowering.default_value(c.field)}, (c.__name__, named)


def test_a_choice_takes_its_alternative_only_where_it_fits():
    calls = []
    pick = lowering.Choice("relu", lambda graph, x: calls.append(("default", x)))
    pick.alternative("kernel", fits=lambda x: x > 0)(lambda graph, x: calls.append(("kernel", x)))
    lowering.CHOICES.remove(pick)

    class Graph:
        def __init__(self, choices):
            self.lowering = choices
    pick(Graph(lowering.CPU), 1)
    pick(Graph(lowering.CPU), -1)
    pick(Graph(lowering.CUDA), 1)
    assert calls == [("kernel", 1), ("default", -1), ("default", 1)]
    with pytest.raises(ValueError, match="no field 'relux'"):
        lowering.choice("relux")(lambda graph: None)


_KERNELS = {name.upper() for name in ggrad.ggml.kernels._FUNCTIONS}


@pytest.mark.parametrize("backend", ["CUDA", "CUDA_TWINS", "VULKAN", "VULKAN_SHADERS", "RPC"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_gpu_lowering_chooses_only_kernels_its_device_runs(backend, dtype):
    # ggrad's kernels are CPU code; on a GPU a custom node whose kernel has no twin falls back to the CPU (a
    # split each side of it: the step's one split became 11 when LayerNorm's affine kernel had no twin).
    # A char-GPT training step under each GPU lowering, on the CPU (float16 with a GradScaler, as it is
    # trained): its kernels are those with a CUDA twin (CUDA_TWINS), a Vulkan shader (VULKAN_SHADERS) or none.
    from ggrad.examples.char_gpt import CharGPT
    from ggrad.ggml import gpu_twins, vulkan_shaders
    ggrad.manual_seed(0)
    model = CharGPT(32, 32, 2, 2, 16)
    opt = ggrad.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = ggrad.amp.GradScaler("cpu", enabled=dtype == "float16")
    rng = np.random.default_rng(0)
    x = ggrad.tensor(rng.integers(0, 32, (4, 16)).astype(np.int32))
    y = ggrad.tensor(rng.integers(0, 32, 64).astype(np.int32))
    allowed = {"CUDA_TWINS": {name.upper() for name in gpu_twins.TWINS},
               "VULKAN_SHADERS": {name.upper() for name in vulkan_shaders.SHADERS}}.get(backend, set())
    with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, backend)), ggrad.profile() as prof:
        with ggrad.autocast("cpu", dtype=getattr(ggrad, dtype)) if dtype != "float32" else contextlib.nullcontext():
            loss = ggrad.cross_entropy(model(x).reshape(-1, 32), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        loss.item()
    kernels = {op for op in prof.by_op() if op in _KERNELS}
    assert kernels <= allowed, f"{backend} chose CPU kernels {sorted(kernels - allowed)}"
    assert not allowed or kernels, "the profile names no kernel: the check would not see one"
