"""Insert ggrad's hook into the pinned GGML's Vulkan backend: GGML_OP_CUSTOM nodes with a registered shader.

    python scripts/patch_ggml_vulkan.py GGML_SOURCE_DIR     # the sdist's ggml/ folder, patched in place

GGML 0.20.2's Vulkan backend has no custom ops. These insertions, and nothing else, let ggrad register a
compute shader (SPIR-V, ggrad/ggml/vulkan/*.comp) for a custom op's CPU function, with a function of ggrad's
that gives the shader's push constants and workgroup count for a node (through the Vulkan registry's proc
address `ggrad_vk_register_custom`, which the registry gains here): `supports_op` accepts a node that has
one, and the graph's recording dispatches it in GGML's command buffer, after GGML's own barrier logic, like
any of GGML's nodes. The shader sees the node at binding 0 and its sources at 1-10 (an absent source is bound
to the node), and in its push constants each binding's misalignment in bytes (descriptors start on the
device's offset alignment), then ggrad's words (256 bytes in all at most: a device that takes fewer refuses
the node, which then runs on the CPU, as it does a node with a tensor of 4 GiB or more). The pipeline is
built on the node's first use on a device.
Each insertion is placed by an anchor line (anchored_patch.py).
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import anchored_patch  # noqa: E402
from anchored_patch import PatchError  # noqa: E402,F401  (raised by patched)

TARGET = "src/ggml-vulkan/ggml-vulkan.cpp"
PINNED_SHA256 = "c73e8f7980cd416f7fd30860c43f85e4ecacb7db84c0bf057cbb505aaf90142f"
MARK = "ggrad: Vulkan shaders of custom ops"

REGISTRY = f"""\
// {MARK} (inserted by ggrad's scripts/patch_ggml_vulkan.py). A GGML_OP_CUSTOM node names a CPU
// function; ggrad registers a compute shader for it and a function giving a node's push constants (after
// the bindings' misalignments) and workgroup count.
typedef void (*ggrad_vk_launch_t)(const struct ggml_tensor * dst, uint32_t * push, uint32_t * groups);
struct ggrad_vk_shader {{
    ggml_custom_op_t cpu;
    std::vector<uint32_t> spirv;
    uint32_t push_words;
    ggrad_vk_launch_t launch;
    std::map<vk_device_struct *, vk_pipeline> pipelines;
}};
static std::deque<ggrad_vk_shader> ggrad_vk_shaders;
static std::mutex ggrad_vk_shaders_mutex;
#define GGRAD_VK_BINDINGS (GGML_MAX_SRC + 1)
#define GGRAD_VK_PUSH_WORDS_MAX (64 - GGRAD_VK_BINDINGS)   // 256 bytes in all, where the device takes them
static_assert(GGRAD_VK_BINDINGS == 11 && GGRAD_VK_BINDINGS <= MAX_PARAMETER_COUNT, "ggrad's shaders bind 11 buffers");

static ggrad_vk_shader * ggrad_vk_shader_of(const struct ggml_tensor * node) {{
    if (node->op != GGML_OP_CUSTOM) {{
        return nullptr;
    }}
    struct ggml_custom_op_params params;
    memcpy(&params, node->op_params, sizeof(params));
    std::lock_guard<std::mutex> lock(ggrad_vk_shaders_mutex);
    for (auto & shader : ggrad_vk_shaders) {{
        if (shader.cpu == params.fun) {{
            return &shader;
        }}
    }}
    return nullptr;
}}

// 0 once the shader (`words` 32-bit words of SPIR-V) runs the nodes of `cpu`; -1 for a bad argument, -2 when
// `cpu` already has one
static int ggrad_vk_register_custom(ggml_custom_op_t cpu, const uint32_t * spirv, size_t words, uint32_t push_words,
        ggrad_vk_launch_t launch) {{
    if (cpu == nullptr || spirv == nullptr || words < 5 || launch == nullptr || push_words > GGRAD_VK_PUSH_WORDS_MAX) {{
        return -1;
    }}
    std::lock_guard<std::mutex> lock(ggrad_vk_shaders_mutex);
    for (auto & shader : ggrad_vk_shaders) {{
        if (shader.cpu == cpu) {{
            return -2;
        }}
    }}
    ggrad_vk_shaders.push_back({{cpu, std::vector<uint32_t>(spirv, spirv + words), push_words, launch, {{}}}});
    return 0;
}}

// whether `device` runs `op` by a shader of ggrad's: one is registered for it, the device takes its push
// constants, and its tensors are below 4 GiB (the shaders index in 32 bits)
static bool ggrad_vk_supports(const vk_device & device, const struct ggml_tensor * op) {{
    const ggrad_vk_shader * shader = ggrad_vk_shader_of(op);
    if (shader == nullptr ||
            4 * (GGRAD_VK_BINDINGS + shader->push_words) > device->properties.limits.maxPushConstantsSize) {{
        return false;
    }}
    for (int i = -1; i < GGML_MAX_SRC; i++) {{
        const ggml_tensor * t = i < 0 ? op : op->src[i];
        if (t != nullptr && ggml_nbytes(t) >= (size_t(1) << 32)) {{
            return false;
        }}
    }}
    return true;
}}

static void * ggrad_vk_get_proc_address(ggml_backend_reg_t reg, const char * name) {{
    GGML_UNUSED(reg);
    if (strcmp(name, "ggrad_vk_register_custom") == 0) {{
        return (void *)ggrad_vk_register_custom;
    }}
    return nullptr;
}}

static void ggrad_vk_custom(ggml_backend_vk_context * ctx, vk_context & subctx, ggml_tensor * node) {{
    ggrad_vk_shader * shader = ggrad_vk_shader_of(node);
    vk_pipeline pipeline;
    {{
        std::lock_guard<std::mutex> lock(ggrad_vk_shaders_mutex);
        vk_pipeline & made = shader->pipelines[ctx->device.get()];
        if (!made) {{
            made = std::make_shared<vk_pipeline_struct>();
            made->name = "ggrad_custom";
            made->parameter_count = GGRAD_VK_BINDINGS;
            made->push_constant_size = 4 * (GGRAD_VK_BINDINGS + shader->push_words);
            made->wg_denoms = {{1, 1, 1}};
            made->align = 1;
            made->initialized = true;
            ggml_vk_create_pipeline_func(ctx->device, made, 4 * shader->spirv.size(), shader->spirv.data(), "main",
                                         GGRAD_VK_BINDINGS, {{1, 1, 1}}, {{}}, false, false, 0);
        }}
        pipeline = made;
    }}
    ggml_pipeline_request_descriptor_sets(ctx, pipeline, 1);
    std::vector<uint32_t> push(GGRAD_VK_BINDINGS + shader->push_words, 0);
    vk_subbuffer b[GGRAD_VK_BINDINGS];
    for (int i = 0; i < GGRAD_VK_BINDINGS; i++) {{
        const ggml_tensor * t = i == 0 || node->src[i - 1] == nullptr ? node : node->src[i - 1];
        b[i] = ggml_vk_tensor_subbuffer(ctx, t, true);
        push[i] = (uint32_t) (b[i].size - ggml_nbytes(t));   // the bytes the descriptor starts before t
    }}
    uint32_t groups[3] = {{1, 1, 1}};
    shader->launch(node, push.data() + GGRAD_VK_BINDINGS, groups);
    ggml_vk_dispatch_pipeline(ctx, subctx, pipeline,
                              {{b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10]}}, push,
                              {{groups[0], groups[1], groups[2]}});
}}

"""
BUILD = """\
    case GGML_OP_CUSTOM: // ggrad
        ggrad_vk_custom(ctx, compute_ctx, node);

        break;
"""
SUPPORTS = """\
        case GGML_OP_CUSTOM: // ggrad
            return ggrad_vk_supports(device, op);
"""
PROC = """\
    reg.iface.get_proc_address = ggrad_vk_get_proc_address; // ggrad
"""

# (text, the line it goes before, the line after which that anchor is searched for)
INSERTIONS = [
    (REGISTRY, "static bool ggml_vk_build_graph(", None),
    (BUILD, "case GGML_OP_REPEAT:", "static bool ggml_vk_build_graph("),
    (SUPPORTS, "case GGML_OP_UNARY:", "static bool ggml_backend_vk_device_supports_op("),
    (PROC, "try {", "ggml_backend_reg_t ggml_backend_vk_reg() {"),
]


def patched(source):
    """The text of ggml-vulkan.cpp with ggrad's insertions."""
    return anchored_patch.apply(source, MARK, PINNED_SHA256, TARGET, INSERTIONS)


if __name__ == "__main__":
    anchored_patch.main(sys.argv, patched, TARGET, "ggrad's custom-op hook", __doc__)
