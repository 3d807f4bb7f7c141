"""Per-backend lowering: the one place that knows which GGML ops each backend runs fast.

A rule says what to compute (sum a broadcast gradient, the weight gradient g^T x, a cross-entropy);
the choices here say how, by the backend of the device the graph runs on, because what is fast on one
backend is slow or missing on another (GGML 0.20.2, measured on this project's machines):

- broadcast reductions (every bias gradient): on the CPU repeat_back is the fastest (2 ms for a
  [8192, 512] gradient vs 4-8 ms otherwise); on CUDA it takes 1.9 ms where a transposed copy and
  sum_rows take 0.05 ms, and out_prod with a column of ones (cuBLAS, f32) needs no copy at all.
- weight gradients: on the CPU mul_mat of transposed copies runs about twice as fast as out_prod; on
  CUDA out_prod (f32 only) needs no copies; Vulkan's out_prod is a slow kernel (H200, big GPT: 115 ms of
  a 204 ms step in 49 out_prods), so Vulkan takes mul_mat too (that step: 550 -> 76 ms/step).
- GGML's fused cross_entropy_loss_back has no Vulkan kernel (its forward, cross_entropy_loss, is not used:
  it adds per-thread partial sums, so its result followed the thread count). An RPC server's backend is not
  known to its client (GGML's protocol reports no capabilities, and the server computes an op its backend
  lacks as nothing: a Vulkan server gave wrong losses), so RPC devices take only ops every backend has.
- a contiguous copy of a transposed view (the operands of those mul_mats, attention's k^T): the CPU's cont
  copies it element by element through a memcpy call each, 4-5 ns an element; its concat kernel assigns
  typed elements, so a concat of the view's two halves copies it 2-2.5x faster (W2 step at one thread:
  see the commit that made it). GPUs keep cont.
- row sums (layer norm's backward, softmax's): the CPU's sum_rows adds each row serially in double
  precision (a [1024, 128] f32 input: 283 us at one thread); mul_mat with a column of ones adds it in
  vector lanes as every matmul does (11 us). GPUs keep sum_rows.
- one value per row against a full operand (x - mean(x) in layer norm's backward): the CPU's binary
  kernels make one call per element when b's rows have one element (a [1024, 128] sub: 453 us at one
  thread); out_prod of a column of ones and b writes b out to a's shape first (52 us, both nodes).
- GELU (tanh): the CPU's gelu looks x up in an f16 table (errors up to 4e-3; 1272 us for 512K f32
  at one thread); silu(z) / u with z = x u, u = 2c(1 + a x^2) is f32-exact with GGML's vectorized
  exp (about half the time, ten nodes; RPC servers take it), and its gradient eleven nodes more, with
  GGML's scalar sigmoid. ggrad's CPU kernels (csrc/gelu.c) do each in one vectorized pass. GPUs keep
  their gelu kernels.
- f32 matrix products: GGML's CPU kernels (llamafile's, or its dot products) take the sum of each output
  element across vector lanes at the end, which costs most at the small k of a transformer's products
  ([1024, 128] @ [128, 512]: ~45 GF/s at one thread); ggrad's own kernel (ggrad/ggml/csrc/matmul.c,
  a custom op) accumulates whole register tiles instead (~100 GF/s) and reads transposed and permuted
  operands in place, so weight gradients and attention's head layouts need no copies. A custom op runs
  only in this process: RPC servers keep mul_mat.
- joins (cat; the gradients of attention's heads back into the fused projection's layout): the CPU's
  concat assigns element by element with index arithmetic; ggrad's kernel (csrc/concat.c) copies whole
  rows (a [32, 64, 8+4, 16] join: 0.35-0.56 -> 0.16-0.18 ms at one thread).
- layer norm: GGML's norm has no backward; its composition (rms_norm_back of the centred input, then
  centring's backward) is nine nodes. ggrad's CPU kernels (csrc/norm.c) do each way in one pass a row.
- a classification loss's labels from class indices (a row of zeros with a one, zero rows where ignored):
  GGML's ops take six elementwise nodes; ggrad's CPU kernel (csrc/labels.c) one.
- ReLU: GGML's relu gives 0 at a nan (PyTorch's gives nan); carrying the nan takes six more nodes, and
  the gradient four. ggrad's CPU kernels (csrc/relu.c) take one each way.
- softmax with a scale and a mask (attention's probabilities): the CPU's soft_max_ext makes six passes
  over each row, the mask's addition and the maximum scalar (~2.3 ns an element on 64-wide rows, 13% of
  the W2 step at two threads); ggrad's kernel (csrc/softmax.c) three vector passes.
- float16 and bfloat16 products on CUDA: GGML's product of float16 sums in float16 unless told to sum in
  float32, which converts both operands to float32 and runs TF32; its out_prod takes float32 only, so an
  autocast weight gradient casts its half rows up. ggrad's twin (kernels.matmul_half on cuBLAS, summing in
  float32) reads half operands, transposed ones in place: chosen where the CUDA backend runs ggrad's twins
  (gpu_twins.py), which then also run the GELU and layer norm kernels.
- a cached decode step's attention (one query a row over a static cache, most keys masked): the CPU's
  flash_attn_ext skips the masked keys and writes the heads merged; 25-35 fewer nodes a token in the
  char-GPT, and at one thread 707 -> 728 (small) and 202 -> 234 (large) tokens/s at batch 1, 3,833 -> 6,567
  (small, batch 8) on a loaded machine; at two threads even at batch 1 and behind at the large model's batch 8
  (benchmarks/README.md). GPUs keep the composed path: the CUDA build
  of benchmarks/gpu_run.sh has no flash-attention kernels (GGML_CUDA_FA=OFF), and neither was measured.
- AdamW's step: the CPU's opt_step_adamw is scalar (a square root and a division an element, ~2.4 ns a
  parameter at one thread); ggrad's kernel (csrc/adamw.c) is the same formula in vectors.
"""

import dataclasses

from ..ggml import gpu_twins


@dataclasses.dataclass(frozen=True)
class Lowering:
    """The choices for one backend.

    Attributes:
        reduce_leading: sum over leading dimensions by "repeat_back", by "sum_rows" of a transposed copy, or
            by "out_prod" with a column of ones (both sum in f32: other gradients are cast to it and back).
        weight_grad: the gradient g^T x of x @ w^T by "mul_mat" of transposed copies or by "out_prod".
        fused_cross_entropy: use GGML's cross_entropy_loss_back for cross-entropy's gradient.
        strided_matmul: which mul_mat operands whose rows are contiguous but whose other strides are not
            (permuted views) are read without a copy: "both", "first" (mul_mat's src0, x @ w^T's w) or "none".
        strided_bf16_second: whether "both" includes a bfloat16 second operand (src1): Vulkan's mul_mat reads
            only float32 and float16 ones strided (an attention product of bfloat16 heads fell back to the CPU).
        transpose_copy: a contiguous copy of a transposed view by "cont" or by "concat" of its two halves
            (pending.transposed_copy).
        row_sum: the sum of each row of a contiguous f32 tensor by "sum_rows" or by "mul_mat" with ones.
        column_broadcast: a binary op whose f32 b has one value per row of a: GGML's op "repeat"s it, or
            "out_prod" with ones writes b out to a's shape first.
        gelu_tanh: GELU's tanh form on f32 by GGML's "gelu", by a composition around "silu", or by ggrad's
            "kernel" (kernels.gelu_tanh_f32 and its gradient; CPU only).
        matmul: f32 products by GGML's "mul_mat" or by ggrad's "kernel" (kernels.matmul_f32; CPU only).
        half_matmul: products of float16 or bfloat16 operands by GGML's "mul_mat" or by ggrad's "kernel"
            (kernels.matmul_half, summing in float32; CUDA's twin, or the CPU's plain loop), which also
            takes the weight gradients of autocast's products.
        concat: f32 joins by GGML's "concat" or by ggrad's "kernel" (kernels.concat_f32; CPU only).
        layer_norm: layer norm's core on f32 by GGML's "norm" (and a composed gradient) or by ggrad's
            "kernel" (kernels.layer_norm_f32 and its gradient; CPU only).
        adamw: AdamW's fused step by GGML's "opt_step_adamw" or by ggrad's "kernel" (kernels.adamw_f32; CPU
            only).
        relu: ReLU and its gradient on f32 by GGML's "ggml" ops or by ggrad's "kernel" (kernels.relu_f32,
            kernels.relu_back_f32; CPU only).
        softmax: softmax(x * scale + mask) on f32 without ALiBi by GGML's "ggml" soft_max_ext or by ggrad's
            "kernel" (kernels.softmax_f32; CPU only).
        class_labels: a loss's labels from class indices by GGML's elementwise "ggml" ops or by ggrad's
            "kernel" (kernels.class_labels_f32; CPU only).
        decode_attention: a cached decode step's attention (no gradient) by the composed "softmax" path or by
            GGML's fused "flash_attn_ext" (nn/decode_attention.py).
    """
    reduce_leading: str = "repeat_back"
    weight_grad: str = "mul_mat"
    fused_cross_entropy: bool = True
    strided_matmul: str = "both"
    strided_bf16_second: bool = True
    transpose_copy: str = "cont"
    row_sum: str = "sum_rows"
    column_broadcast: str = "repeat"
    gelu_tanh: str = "gelu"
    matmul: str = "mul_mat"
    half_matmul: str = "mul_mat"
    concat: str = "concat"
    layer_norm: str = "norm"
    adamw: str = "opt_step_adamw"
    relu: str = "ggml"
    softmax: str = "ggml"
    class_labels: str = "ggml"
    decode_attention: str = "softmax"


# CPU: GGML's llamafile kernel (the build users get) reads its first operand (src0) with any row and batch
# strides but takes only a contiguous second one: a strided src1 falls back to the generic kernel, slower
# than the copy. So only the first operand is read in place (attention's k for the scores, v for dW).
CPU = Lowering(strided_matmul="first", transpose_copy="concat", row_sum="mul_mat", column_broadcast="out_prod",
              gelu_tanh="kernel", matmul="kernel", concat="kernel", layer_norm="kernel", adamw="kernel",
              relu="kernel", softmax="kernel", class_labels="kernel", decode_attention="flash_attn_ext")
RPC = dataclasses.replace(CPU, gelu_tanh="silu", matmul="mul_mat", concat="concat", layer_norm="norm",
                          adamw="opt_step_adamw", relu="ggml", softmax="ggml", class_labels="ggml",
                          fused_cross_entropy=False, decode_attention="softmax")   # ops every backend has
CUDA = Lowering(reduce_leading="out_prod", weight_grad="out_prod")
CUDA_TWINS = dataclasses.replace(CUDA, half_matmul="kernel", gelu_tanh="kernel",   # ggrad's twins registered
                                 layer_norm="kernel")
VULKAN = Lowering(reduce_leading="sum_rows", fused_cross_entropy=False, strided_bf16_second=False)
_BY_BACKEND = {"CPU": CPU, "RPC": RPC, "CUDA": CUDA, "Vulkan": VULKAN}
_forced = {}   # device name -> Lowering, set by `execution.forced_lowering` (tests run the GPU choices on the CPU)


def for_device(device):
    """The Lowering of `device`'s backend (the RPC one for backends not listed)."""
    forced = _forced.get(device.name)
    if forced is not None:
        return forced
    if device.backend_name == "CUDA" and gpu_twins.registered("CUDA"):
        return CUDA_TWINS
    return _BY_BACKEND.get(device.backend_name, RPC)


def forced_choices(device):
    """The Lowering forced on `device` (None: its backend's)."""
    return _forced.get(device.name)


def force(device, choices):
    """Lower `device`'s next graphs as `choices` says (None: as its backend's); `execution.forced_lowering`
    is the block that does it safely."""
    if choices is None:
        _forced.pop(device.name, None)
    else:
        _forced[device.name] = choices
