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

/* the GradScaler's check (vulkan/nonfinite.comp): each source's element count (0 where absent), one workgroup
   a slot of the node */
void ggrad_vk_launch_nonfinite(const struct ggml_tensor *dst, uint32_t *push, uint32_t *groups) {
    for (int s = 0; s < GGML_MAX_SRC - 1; s++)
        push[s] = dst->src[s] != NULL ? (uint32_t)ggml_nelements(dst->src[s]) : 0u;
    groups[0] = (uint32_t)ggml_nelements(dst);
    groups[1] = groups[2] = 1;
}

/* a row shader (vulkan/rows.glsl): the row length, the rows and the custom op's userdata (its 32 low bits:
   layer norm's eps), one workgroup a row (beyond 65535 rows in a second grid dimension). GGML keeps a custom
   node's function, task count and userdata in its op_params, in this order. */
void ggrad_vk_launch_rows(const struct ggml_tensor *dst, uint32_t *push, uint32_t *groups) {
    struct {
        void *fun;
        int n_tasks;
        void *userdata;
    } params;
    memcpy(&params, dst->op_params, sizeof params);
    const int64_t rows = ggml_nrows(dst);
    push[0] = (uint32_t)dst->ne[0];
    push[1] = (uint32_t)rows;
    push[2] = (uint32_t)(uintptr_t)params.userdata;
    groups[0] = (uint32_t)(rows < 1 ? 1 : (rows > VK_GROUPS_MAX ? VK_GROUPS_MAX : rows));
    groups[1] = (uint32_t)(rows > VK_GROUPS_MAX ? (rows + VK_GROUPS_MAX - 1) / VK_GROUPS_MAX : 1);
    groups[2] = 1;
}
