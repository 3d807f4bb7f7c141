/* The launches of ggrad's Vulkan shaders (ggrad/ggml/vulkan/*.comp): for a custom node, the push constants
   that follow the bindings' misalignments and the workgroup count, as the hook in GGML's Vulkan backend
   (scripts/patch_ggml_vulkan.py) asks them of the function registered with each shader. */

#include <stdint.h>
#include <string.h>

#include "ggml.h"

#define VK_GROUP 256           /* the shaders' workgroup size (vulkan/elementwise.glsl, ...) */
#define VK_GROUPS_MAX 65535    /* Vulkan's guaranteed least maxComputeWorkGroupCount[0] */

/* an elementwise shader over the node's elements: their count and which sources the node has (bit s for
   src[s]); one invocation an element, or each a grid's width apart beyond 65535 groups (the node's builder
   keeps the count below 2**32) */
void ggrad_vk_launch_elementwise(const struct ggml_tensor *dst, uint32_t *push, uint32_t *groups) {
    const int64_t n = ggml_nelements(dst);
    const int64_t blocks = (n + VK_GROUP - 1) / VK_GROUP;
    uint32_t sources = 0;
    for (int s = 0; s < GGML_MAX_SRC; s++)
        sources |= dst->src[s] != NULL ? 1u << s : 0u;
    push[0] = (uint32_t)n;
    push[1] = sources;
    groups[0] = (uint32_t)(blocks < 1 ? 1 : (blocks > VK_GROUPS_MAX ? VK_GROUPS_MAX : blocks));
    groups[1] = groups[2] = 1;
}

/* the same for the half elementwise shaders (vulkan/half_elementwise.glsl), and whether the node is bfloat16
   (else float16) */
void ggrad_vk_launch_elementwise_half(const struct ggml_tensor *dst, uint32_t *push, uint32_t *groups) {
    ggrad_vk_launch_elementwise(dst, push, groups);
    push[2] = dst->type == GGML_TYPE_BF16;
}

/* the GradScaler's check (vulkan/nonfinite.comp): each source's element count (0 where absent), one workgroup
   a slot of the node */
void ggrad_vk_launch_nonfinite(const struct ggml_tensor *dst, uint32_t *push, uint32_t *groups) {
    for (int s = 0; s < GGML_MAX_SRC - 1; s++)
        push[s] = dst->src[s] != NULL ? (uint32_t)ggml_nelements(dst->src[s]) : 0u;
    groups[0] = (uint32_t)ggml_nelements(dst);
    groups[1] = groups[2] = 1;
}

/* a custom node's userdata: GGML keeps its function, task count and userdata in its op_params, in this order */
static uint64_t userdata_of(const struct ggml_tensor *dst) {
    struct {
        void *fun;
        int n_tasks;
        void *userdata;
    } params;
    memcpy(&params, dst->op_params, sizeof params);
    return (uint64_t)(uintptr_t)params.userdata;
}

/* a row shader (vulkan/rows.glsl): the row length, the rows and the custom op's userdata (its 32 low bits:
   layer norm's eps), one workgroup a row (beyond 65535 rows in a second grid dimension) */
void ggrad_vk_launch_rows(const struct ggml_tensor *dst, uint32_t *push, uint32_t *groups) {
    const int64_t rows = ggml_nrows(dst);
    push[0] = (uint32_t)dst->ne[0];
    push[1] = (uint32_t)rows;
    push[2] = (uint32_t)userdata_of(dst);
    groups[0] = (uint32_t)(rows < 1 ? 1 : (rows > VK_GROUPS_MAX ? VK_GROUPS_MAX : rows));
    groups[1] = (uint32_t)(rows > VK_GROUPS_MAX ? (rows + VK_GROUPS_MAX - 1) / VK_GROUPS_MAX : 1);
    groups[2] = 1;
}

/* flash attention's shaders (vulkan/flash.glsl's push constants): the operands' type, causality, layout and
   whether a mask is there; the sizes; q's, k's, v's and the mask's row strides in bytes; the userdata's scale
   and offset (kernels._attention_bits); for the backward O's, dO's and L's strides; one invocation a query
   row, then (the backward) a key row, 64 a workgroup */
static void flash_launch(const struct ggml_tensor *dst, int mask_src, int backward, uint32_t *push,
                         uint32_t *groups) {
    const struct ggml_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *mask = dst->src[mask_src];
    const uint64_t bits = userdata_of(dst);
    const uint32_t type = q->type == GGML_TYPE_F32 ? 0u : (q->type == GGML_TYPE_F16 ? 1u : 2u);
    push[0] = type | (uint32_t)((bits >> 32) & 1) << 2 | (uint32_t)(bits >> 63) << 3 | (mask != NULL) << 4;
    const int64_t sizes[8] = {q->ne[0], v->ne[0], q->ne[1], k->ne[1], q->ne[2], k->ne[2], q->ne[3], k->ne[3]};
    for (int i = 0; i < 8; i++)
        push[1 + i] = (uint32_t)sizes[i];
    const struct ggml_tensor *strided[4] = {q, k, v, mask};
    for (int t = 0; t < 4; t++)
        for (int i = 1; i < 4; i++)
            push[9 + 3 * t + (i - 1)] = strided[t] != NULL ? (uint32_t)strided[t]->nb[i] : 0u;
    push[21] = mask != NULL ? (uint32_t)mask->ne[2] : 1u;
    push[22] = mask != NULL ? (uint32_t)mask->ne[3] : 1u;
    push[23] = (uint32_t)bits;
    push[24] = (uint32_t)(int32_t)((int64_t)((bits >> 33) & ((1ull << 30) - 1)) - (1ll << 29));
    int64_t rows = q->ne[1] * q->ne[2] * q->ne[3];
    for (int i = 25; i < 33; i++)
        push[i] = 0;
    if (backward) {
        const struct ggml_tensor *o = dst->src[3], *dout = dst->src[4], *lse = dst->src[5];
        for (int i = 1; i < 4; i++) {
            push[24 + i] = (uint32_t)o->nb[i];
            push[27 + i] = (uint32_t)dout->nb[i];
        }
        push[31] = (uint32_t)lse->nb[1];
        push[32] = (uint32_t)lse->nb[2];
        rows += k->ne[1] * k->ne[2] * k->ne[3];
    }
    const int64_t blocks = (rows + 63) / 64;
    groups[0] = (uint32_t)(blocks < 1 ? 1 : (blocks > VK_GROUPS_MAX ? VK_GROUPS_MAX : blocks));
    groups[1] = (uint32_t)(blocks > VK_GROUPS_MAX ? (blocks + VK_GROUPS_MAX - 1) / VK_GROUPS_MAX : 1);
    groups[2] = 1;
}

/* kernels.flash_attn's node: q, k, v and an optional mask (src[3]) */
void ggrad_vk_launch_flash(const struct ggml_tensor *dst, uint32_t *push, uint32_t *groups) {
    flash_launch(dst, 3, 0, push, groups);
}

/* kernels.flash_attn_back's node: q, k, v, O, dO, L and an optional mask (src[6]) */
void ggrad_vk_launch_flash_back(const struct ggml_tensor *dst, uint32_t *push, uint32_t *groups) {
    flash_launch(dst, 6, 1, push, groups);
}
