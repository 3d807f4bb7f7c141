"""Every GGML function that builds a tensor in a context has a builder, named and ordered as in GGML,
with a docstring for every argument; plus the context handling and cost every builder shares."""

import inspect
import time

import pytest

import ggrad.ggml as gg
from ggrad.ggml import errors, ffi, lib, ops

# Deliberately not wrapped: they make no op. Each with its reason.
EXCLUDED = {
    "ggml_new_tensor": "leaf constructor: Context.new_tensor(dtype, ne) covers it",
    "ggml_new_tensor_1d": "leaf constructor: Context.new_tensor(dtype, ne) covers it",
    "ggml_new_tensor_2d": "leaf constructor: Context.new_tensor(dtype, ne) covers it",
    "ggml_new_tensor_3d": "leaf constructor: Context.new_tensor(dtype, ne) covers it",
    "ggml_new_tensor_4d": "leaf constructor: Context.new_tensor(dtype, ne) covers it",
    "ggml_new_f32": "leaf with a value written into context memory (none in no_alloc contexts): new_tensor + set_data",
    "ggml_new_i32": "leaf with a value written into context memory (none in no_alloc contexts): new_tensor + set_data",
    "ggml_get_first_tensor": "iteration over a context, not an op: Context.tensors()",
    "ggml_get_next_tensor": "iteration over a context, not an op: Context.tensors()",
    "ggml_get_tensor": "lookup by name, not an op: Context.tensors()",
}


def tensor_builders():
    """Names of the `lib` functions returning `struct ggml_tensor *` with a `struct ggml_context *` first."""
    out = []
    for name in dir(lib):
        if not name.startswith("ggml_"):
            continue
        try:
            t = ffi.typeof(getattr(lib, name))
        except (TypeError, ffi.error):
            continue
        if (t.kind == "function" and t.result.cname == "struct ggml_tensor *" and t.args
                and t.args[0].cname == "struct ggml_context *"):
            out.append(name)
    return sorted(out)


LIB_BUILDERS = tensor_builders()


def test_the_header_was_found():
    assert len(LIB_BUILDERS) > 200 and "ggml_add" in LIB_BUILDERS and "ggml_opt_step_adamw" in LIB_BUILDERS


def test_exclusions_are_the_documented_ones():
    assert ops.EXCLUDED.keys() == EXCLUDED.keys()
    assert set(EXCLUDED) <= set(LIB_BUILDERS)


@pytest.mark.parametrize("cname", [n for n in LIB_BUILDERS if n not in EXCLUDED])
def test_every_lib_builder_has_a_builder(cname):
    name = cname[len("ggml_"):]
    fn = getattr(ops, name, None)
    assert callable(fn), f"ops.{name} is missing"
    assert fn.__name__ == name and fn.__qualname__ == name
    params = list(inspect.signature(fn).parameters)
    c_args = ffi.typeof(getattr(lib, cname)).args
    assert params[0] == "ctx"
    assert len(params) == len(c_args), f"ops.{name}{params} vs GGML's {len(c_args)} arguments"
    doc = inspect.getdoc(fn) or ""
    assert len(doc.splitlines()[0]) > 10
    missing = [p for p in params if f"{p}:" not in doc]
    assert not missing, f"ops.{name}'s docstring does not describe {missing}"


def test_no_builder_without_a_ggml_function():
    assert set(ops.BUILDERS) == {n[len("ggml_"):] for n in LIB_BUILDERS} - {n[len("ggml_"):] for n in EXCLUDED}
    assert len(ops.BUILDERS) == len(set(ops.BUILDERS))


def test_argument_names_follow_ggml_where_python_allows():
    assert list(inspect.signature(ops.soft_max_ext).parameters) == ["ctx", "a", "mask", "scale", "max_bias"]
    assert list(inspect.signature(ops.im2col_back).parameters)[:4] == ["ctx", "a", "b", "ne"]
    assert list(inspect.signature(ops.pool_2d).parameters) == ["ctx", "a", "op", "k0", "k1", "s0", "s1", "p0", "p1"]
    assert list(inspect.signature(ops.mul_mat_id).parameters) == ["ctx", "as_", "b", "ids"]   # `as` is a keyword
    assert list(inspect.signature(ops.view_2d).parameters) == ["ctx", "a", "ne0", "ne1", "nb1", "offset"]


def test_enum_and_dtype_arguments_accept_names_and_values(ctx):
    a = ctx.new_tensor("f32", (6, 4, 3))
    t1 = ops.pool_2d(ctx, a, "avg", 2, 2, 2, 2, 0, 0)
    t2 = ops.pool_2d(ctx, a, lib.GGML_OP_POOL_AVG, 2, 2, 2, 2, 0, 0)
    assert t1.ptr.op_params[0] == t2.ptr.op_params[0] == lib.GGML_OP_POOL_AVG
    assert ops.argsort(ctx, a, "DESC").ptr.op_params[0] == lib.GGML_SORT_ORDER_DESC
    assert ops.cast(ctx, a, gg.f16).dtype is gg.f16
    assert ops.cast(ctx, a, "float16").dtype is gg.f16
    assert ops.cast(ctx, a, lib.GGML_TYPE_BF16).dtype is gg.bf16
    assert ops.rope(ctx, a, ctx.new_tensor("i32", (3,)), 6, "neox").ptr.op_params[2] == lib.GGML_ROPE_TYPE_NEOX


def test_results_belong_to_ctx_and_inputs_may_come_from_another(ctx):
    weights = gg.Context(n_tensors=4)
    w = weights.new_tensor("f32", (8, 4))
    x = ctx.new_tensor("f32", (8, 2))
    y = ops.mul_mat(ctx, w, x)
    assert y.ctx is ctx and y.ne == (4, 2, 1, 1) and y.src(0) == w


def test_alloc_contexts_are_checked_for_data_room():
    c = gg.Context(n_tensors=8, no_alloc=False, mem_size=64 * 1024)
    a = c.new_tensor("f32", (16, 16))
    for _ in range(5):
        ops.add(c, a, a)                               # 1 KiB each: fits
    big = ops.repeat_4d(c, a, 16, 16, 4, 1)            # 4 KiB
    assert big.ne == (16, 16, 4, 1) and big.is_allocated
    with pytest.raises(errors.GGMLError, match="repeat_4d: the context is full"):
        ops.repeat_4d(c, a, 16, 16, 64, 4)              # 1 MiB does not fit
    img = c.new_tensor("f32", (8, 8, 2, 1))
    k = c.new_tensor("f16", (3, 3, 2, 4))
    assert ops.conv_2d(c, k, img, 1, 1, 1, 1, 1, 1).ne == (8, 8, 4, 1)  # a composite: every part is counted
    assert all(t.is_allocated for t in c.tensors() if t.ptr.view_src == ffi.NULL)


def test_the_abort_hook_learns_the_op_before_ggml_runs(ctx):
    a = ctx.new_tensor("f32", (4,))
    ops.soft_max(ctx, a)
    assert gg.hooks._state["op"] == "soft_max"


def test_builders_are_cheap(ctx):
    """ops.add costs ~1.5 us on a 2-core CI machine (raw GGML call + GTensor: ~0.6 us); fail only when
    validation has become an order of magnitude slower."""
    big = gg.Context(n_tensors=20000)
    a = big.new_tensor("f32", (64, 32))
    b = big.new_tensor("f32", (64, 1))
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(2000):
            ops.add(big, a, b)
        best = min(best, (time.perf_counter() - t0) / 2000)
    assert best < 20e-6, f"ops.add takes {best * 1e6:.1f} us"
