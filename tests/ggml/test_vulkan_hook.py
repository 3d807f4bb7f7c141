"""ggrad's Vulkan shaders where they cannot run: a GGML without ggrad's hook in its Vulkan backend (the wheel, the
CPU build) registers none, so the lowering keeps GGML's ops. On a Vulkan device (lavapipe's too), tests/gpu
checks the shaders themselves; here glslc compiles them where it is installed, the hook's insertions are
checked on a stand-in of GGML's file, and .ci/run applies them to the sdist."""

import pathlib
import shutil
import subprocess

import pytest

import ggrad.ggml as gg
from ggrad.ggml import kernels, vulkan_shaders
from ggrad.ggml._lib import ffi, lib

from patch_checks import check_refusals, patch_script, patched_stand_in

ROOT = pathlib.Path(__file__).parents[2]


def test_no_shaders_without_the_patched_vulkan_backend():
    if gg.has_backend("Vulkan"):
        pytest.skip("a Vulkan build: tests/gpu checks its shaders")
    assert vulkan_shaders.registered("Vulkan") == frozenset()
    assert gg.build_info()["vulkan_shaders"] == []


def test_other_backends_never_have_shaders():
    assert vulkan_shaders.registered("CUDA") == frozenset()
    assert vulkan_shaders.registered("CPU") == frozenset()


def test_every_shader_has_a_cpu_kernel_a_source_and_a_launch():
    for name, (shader, launch, _) in vulkan_shaders.SHADERS.items():
        assert kernels.cpu_function(name) is not None
        assert (ROOT / "ggrad/ggml/vulkan" / f"{shader}.comp").is_file()
        assert ffi.addressof(lib, f"ggrad_vk_launch_{launch}") is not None


def test_the_shaders_are_looked_for_where_the_variable_says(monkeypatch, tmp_path):
    monkeypatch.setenv("GGRAD_VULKAN_SHADERS", str(tmp_path))
    assert vulkan_shaders.shader_dir() == tmp_path
    monkeypatch.delenv("GGRAD_VULKAN_SHADERS")
    assert vulkan_shaders.shader_dir() == ROOT / "ggrad/ggml/vulkan"


@pytest.mark.skipif(shutil.which("glslc") is None, reason="no glslc on this machine")
def test_the_shaders_compile_with_glslc(tmp_path):
    """A shader that does not compile fails here, before any GPU machine sees it."""
    done = subprocess.run(["bash", str(ROOT / "scripts/build_vulkan_shaders.sh"), str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for shader, _, _ in vulkan_shaders.SHADERS.values():
        spirv = (tmp_path / f"{shader}.spv").read_bytes()
        assert spirv[:4] == bytes.fromhex("03022307")   # SPIR-V's magic number, little-endian


@pytest.mark.parametrize("n, groups", [(1, 1), (256, 1), (257, 2), (1000, 4), (256 * 65535 + 1, 65535)])
def test_the_elementwise_launch_counts_elements_and_groups(n, groups):
    """Its push constants are the element count and which sources the node has; one invocation an element up
    to 65,535 groups (Vulkan's least guaranteed count), beyond that each invocation takes elements a grid apart
    (vulkan/elementwise.glsl)."""
    ctx = gg.Context(n_tensors=4)
    x = ctx.new_tensor("f32", (n,))
    node = kernels.gelu_tanh_back_f32(ctx, x, x)
    lib.ggrad_vk_launch_elementwise(node.ptr, push := ffi.new("uint32_t[2]"), grid := ffi.new("uint32_t[3]"))
    assert list(push) == [n, 0b11] and list(grid) == [groups, 1, 1]


def test_the_check_launch_counts_each_sources_elements():
    ctx = gg.Context(n_tensors=12)
    xs = [ctx.new_tensor("f32", (3 * i + 1, 2)) for i in range(5)]
    node = kernels.nonfinite_f32(ctx, xs)
    lib.ggrad_vk_launch_nonfinite(node.ptr, push := ffi.new("uint32_t[9]"), grid := ffi.new("uint32_t[3]"))
    assert list(push) == [2, 8, 14, 20, 26, 0, 0, 0, 0]
    assert list(grid) == [kernels.NONFINITE_SLOTS, 1, 1]   # one workgroup a slot


@pytest.mark.parametrize("rows, groups", [(10, [10, 1, 1]), (65535, [65535, 1, 1]), (65536, [65535, 2, 1])])
def test_the_rows_launch_takes_a_workgroup_a_row_and_eps(rows, groups):
    """Row length, rows and layer norm's eps (the custom node's userdata); past 65,535 rows a second grid
    dimension (vulkan/rows.glsl)."""
    ctx = gg.Context(n_tensors=2)
    node = kernels.layer_norm_f32(ctx, ctx.new_tensor("f32", (7, rows)), 0.25)
    lib.ggrad_vk_launch_rows(node.ptr, push := ffi.new("uint32_t[3]"), grid := ffi.new("uint32_t[3]"))
    assert list(push) == [7, rows, 0x3E800000] and list(grid) == groups   # 0.25's bits


def test_the_flash_launches_carry_sizes_strides_and_the_userdata():
    """flash.glsl's push constants: type and flags, sizes, row strides in bytes, scale and offset, and for the
    backward O's, dO's and L's strides; a row of queries (then of keys) an invocation, 64 a workgroup."""
    ctx = gg.Context(n_tensors=16)
    q, k, v = (ctx.new_tensor("f16", ne) for ne in ((32, 5, 4, 2), (32, 7, 2, 2), (24, 7, 2, 2)))
    mask = ctx.new_tensor("f32", (7, 5, 1, 2))
    o, lse = kernels.flash_attn(ctx, q, k, v, mask, scale=0.5, causal=True, offset=2)
    push, grid = ffi.new("uint32_t[33]"), ffi.new("uint32_t[3]")
    lib.ggrad_vk_launch_flash(o.ptr.view_src, push, grid)   # the node o is a view of
    sizes = [32, 24, 5, 7, 4, 2, 2, 2]
    strides = [64, 320, 1280, 64, 448, 896, 48, 336, 672, 28, 140, 140]
    assert list(push)[:25] == [1 | 4 | 16] + sizes + strides + [1, 2, 0x3F000000, 2]
    assert list(grid) == [1, 1, 1]   # 40 query rows
    g = ctx.new_tensor("f32", (24, 5, 4, 2))
    back = kernels.flash_attn_back(ctx, q, k, v, o, g, lse, None, scale=0.5)[0].ptr.view_src
    lib.ggrad_vk_launch_flash_back(back, push, grid)
    assert push[0] == 1 and list(push)[18:25] == [0, 0, 0, 1, 1, 0x3F000000, 0]
    assert list(push)[25:] == [96, 480, 1920, 96, 480, 1920, 20, 80]
    assert list(grid) == [2, 1, 1]   # 40 query rows and 28 key rows


def test_the_hook_is_refused_for_another_ggml_or_twice():
    check_refusals(patch_script("patch_ggml_vulkan"),
                   "static bool ggml_vk_build_graph(ggml_backend_vk_context * ctx) {\n")


def test_the_hook_inserts_lines_and_changes_none(monkeypatch):
    """Every line of the original stays, in order; the insertions sit where their anchors say."""
    patch = patch_script("patch_ggml_vulkan")
    source = ("static bool ggml_vk_build_graph(x) {\n    switch (node->op) {\n    case GGML_OP_REPEAT:\n}\n"
              "static bool ggml_backend_vk_device_supports_op(y) {\n    switch (op->op) {\n"
              "        case GGML_OP_UNARY:\n}\n"
              "ggml_backend_reg_t ggml_backend_vk_reg() {\n    static ggml_backend_reg reg = {};\n    try {\n"
              "    } catch (...) {}\n}\n")
    text = patched_stand_in(patch, monkeypatch, source)
    assert text.index("static void ggrad_vk_custom(") < text.index("static bool ggml_vk_build_graph(x)")
    assert text.index("switch (node->op)") < text.index("ggrad_vk_custom(ctx, compute_ctx, node)") \
        < text.index("case GGML_OP_REPEAT:")
    assert text.index("device_supports_op(y)") < text.index("return ggrad_vk_supports(device, op)") \
        < text.index("case GGML_OP_UNARY:")
    assert text.index("static ggml_backend_reg reg") < text.index("reg.iface.get_proc_address") \
        < text.index("    try {")
