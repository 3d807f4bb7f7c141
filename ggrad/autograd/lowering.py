"""Per-backend lowering: the one place that knows which GGML ops each backend runs fast.

A rule says what to compute (sum a broadcast gradient, the weight gradient g^T x, a cross-entropy); the
`Lowering` of the device's backend says how: which GGML ops, or which of ggrad's own kernels (CPU, CUDA
twins, Vulkan shaders), since what is fast on one backend is slow or missing on another. The measurements
behind each choice: benchmarks/README.md, "Per-backend lowering".
"""

import dataclasses
import functools

from ..ggml import gpu_twins, vulkan_shaders


@dataclasses.dataclass(frozen=True)
class Lowering:
    """The choices for one backend.

    Attributes:
        reduce_leading: sum over leading dimensions by "repeat_back", by "sum_rows" of a transposed copy, or
            by "out_prod" with a column of ones (both sum in f32: other gradients are cast to it and back).
        weight_grad: the gradient g^T x of x @ w^T by "mul_mat" of transposed copies or by "out_prod".
        fused_cross_entropy: use GGML's cross_entropy_loss_back for cross-entropy's gradient.
        strided_matmul: which mul_mat operands whose rows are contiguous but whose other strides are not
            (permuted views) are read without a copy: "both", "first" (mul_mat's src0, x @ w^T's w), "none",
            or "both_but_bf16" (not a bfloat16 second operand, src1: Vulkan's mul_mat reads only float32 and
            float16 ones strided; an attention product of bfloat16 heads fell back to the CPU).
        transpose_copy: a contiguous copy of a transposed view by "cont" or by "concat" of its two halves
            (pending.transposed_copy).
        row_sum: the sum of each row of a contiguous f32 tensor by "sum_rows" or by "mul_mat" with ones.
        column_broadcast: a binary op whose f32 b has one value per row of a: GGML's op "repeat"s it, or
            "out_prod" with ones writes b out to a's shape first.
        gelu_tanh: GELU's tanh form on f32 by GGML's "gelu", by a composition around "silu", or by ggrad's
            "kernel" (kernels.gelu_tanh_f32 and its gradient; CPU, CUDA's twins, Vulkan's shaders);
            "half_kernel" also computes float16 and bfloat16 tensors in their own dtype, as PyTorch
            (kernels.gelu_tanh_half and its gradient; CPU, CUDA's twins, Vulkan's shaders): no float32
            copies around it.
        matmul: f32 products by GGML's "mul_mat" or by ggrad's "kernel" (kernels.matmul_f32; CPU only).
        half_matmul: products of float16 or bfloat16 operands by GGML's "mul_mat" or by ggrad's "kernel"
            (kernels.matmul_half, summing in float32; CUDA's twin, or the CPU's plain loop), which also
            takes the weight gradients of autocast's products and writes an autocast linear's rounded result
            itself, bias included (ops.products.RoundedHalfLinear).
        concat: f32 joins by GGML's "concat" or by ggrad's "kernel" (kernels.concat_f32; CPU, and CUDA's twin).
        layer_norm: layer norm's core on f32 by GGML's "norm" (and a composed gradient) or by ggrad's
            "kernel" (kernels.layer_norm_f32 and its gradient; CPU, CUDA's twins, Vulkan's shaders).
        adamw: AdamW's fused step by GGML's "opt_step_adamw" or by ggrad's "kernel" (kernels.adamw_f32; CPU,
            CUDA's twin, Vulkan's shader), which also reads a GradScaler's check itself (no selection of each
            gradient).
        relu: ReLU and its gradient on f32 by GGML's "ggml" ops or by ggrad's "kernel" (kernels.relu_f32,
            kernels.relu_back_f32; CPU only).
        softmax: softmax(x * scale + mask) on f32 without ALiBi by GGML's "ggml" soft_max_ext or by ggrad's
            "kernel" (kernels.softmax_f32; CPU only).
        class_labels: a loss's labels from class indices by GGML's elementwise "ggml" ops or by ggrad's
            "kernel" (kernels.class_labels_f32; CPU only).
        attention: softmax(q k^T * scale + mask) v and its gradients by GGML's "ggml" ops (the scores
            materialised) or by ggrad's flash attention kernels (kernels.flash_attn, flash_attn_back): "kernel"
            for every float dtype, "half_kernel" for float16 and bfloat16 operands only (CUDA's twins; Vulkan
            has shaders of them too, run where forced).
        decode_attention: a cached decode step's attention (no gradient) by the composed "softmax" path, by
            GGML's fused "flash_attn_ext", or by ggrad's flash attention "kernel" (its path for few query rows;
            CPU only; flash_attn_ext where it does not take the operands) (nn/decode_attention.py).
        argmax: the first maximum of f32 rows (nan first) by GGML's "ggml" ops (argmax of a key that ranks
            the maxima from the left, 13 nodes) or by ggrad's "kernel" (kernels.argmax_f32; CPU only).
        nonfinite: a GradScaler's inf/nan check of its gradients by GGML's "ggml" ops (a product with zeros,
            a sum and an add a gradient) or by ggrad's "kernel" (kernels.nonfinite_f32, a node for up to 9
            gradients; CUDA's twin, Vulkan's shader).
    """
    reduce_leading: str = "repeat_back"
    weight_grad: str = "mul_mat"
    fused_cross_entropy: bool = True
    strided_matmul: str = "both"
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
    attention: str = "ggml"
    decode_attention: str = "softmax"
    argmax: str = "ggml"
    nonfinite: str = "ggml"


# CPU: GGML's llamafile kernel (the build users get) reads its first operand (src0) with any row and batch
# strides but takes only a contiguous second one: a strided src1 falls back to the generic kernel, slower
# than the copy. So only the first operand is read in place (attention's k for the scores, v for dW).
CPU = Lowering(strided_matmul="first", transpose_copy="concat", row_sum="mul_mat", column_broadcast="out_prod",
              gelu_tanh="kernel", matmul="kernel", concat="kernel", layer_norm="kernel", adamw="kernel",
              relu="kernel", softmax="kernel", class_labels="kernel", decode_attention="kernel",
              argmax="kernel")
RPC = dataclasses.replace(CPU, gelu_tanh="silu", matmul="mul_mat", concat="concat", layer_norm="norm",
                          adamw="opt_step_adamw", relu="ggml", softmax="ggml", class_labels="ggml", argmax="ggml",
                          fused_cross_entropy=False, decode_attention="softmax")   # ops every backend has
CUDA = Lowering(reduce_leading="out_prod", weight_grad="out_prod")
CUDA_TWINS = dataclasses.replace(CUDA, half_matmul="kernel", gelu_tanh="half_kernel",   # ggrad's twins registered
                                 layer_norm="kernel", attention="half_kernel", concat="kernel", adamw="kernel",
                                 nonfinite="kernel")
VULKAN = Lowering(reduce_leading="sum_rows", fused_cross_entropy=False, strided_matmul="both_but_bf16")
# ggrad's shaders registered; attention stays GGML's: its flash shaders (one invocation a row, no shared
# tiles) run where forced, until a GPU's timings choose between them and GGML's products
VULKAN_SHADERS = dataclasses.replace(VULKAN, gelu_tanh="half_kernel", adamw="kernel", nonfinite="kernel",
                                     layer_norm="kernel")
_BY_BACKEND = {"CPU": CPU, "RPC": RPC, "CUDA": CUDA, "Vulkan": VULKAN}
_forced = {}   # device name -> Lowering, set by `execution.forced_lowering` (tests run the GPU choices on the CPU)


def for_device(device):
    """The Lowering of `device`'s backend (the RPC one for backends not listed)."""
    forced = _forced.get(device.name)
    if forced is not None:
        return forced
    if device.backend_name == "CUDA" and gpu_twins.registered("CUDA"):
        return CUDA_TWINS
    if device.backend_name == "Vulkan" and vulkan_shaders.registered("Vulkan") == set(vulkan_shaders.SHADERS):
        return VULKAN_SHADERS
    return _BY_BACKEND.get(device.backend_name, RPC)


class Choice:
    """A function of a graph whose body the graph's Lowering picks: a GGML node builder, or a test that
    decides which path an op takes. The function decorated `@choice("field")` serves the field's default
    value; `@that.alternative("kernel", fits=...)` adds the body for another value, used where the graph's
    Lowering names that value and `fits(*args)` holds for the arguments after the graph, else the default.
    Ops call the choice; none reads the Lowering."""

    def __init__(self, field, default):
        if field not in _FIELDS:
            raise ValueError(f"choice: Lowering has no field {field!r}")
        self.field, self.default, self.builds = field, default, {}
        self.flags = None   # the values a `names` flag answers True for
        functools.update_wrapper(self, default)
        CHOICES.append(self)

    def alternative(self, value, fits=None):
        """Decorator: the build for the Lowering value `value` (where `fits` holds, if given)."""
        def register(build):
            self.builds[value] = (build, fits)
            return build
        return register

    def __call__(self, graph, *args):
        chosen = self.builds.get(getattr(graph.lowering, self.field))
        if chosen is not None and (chosen[1] is None or chosen[1](*args)):
            return chosen[0](graph, *args)
        return self.default(graph, *args)


CHOICES = []   # every Choice made (tests/autograd/test_lowering.py checks them against the backends' Lowerings)
_FIELDS = {f.name: f.default for f in dataclasses.fields(Lowering)}


def choice(field):
    """Decorator: the default build of a Choice on the Lowering field `field`."""
    return lambda default: Choice(field, default)


def names(field, *values):
    """A Choice answering, for a graph, whether its Lowering's `field` is one of `values`: for a caller that
    prepares an op's operands one way or another before the op's own Choice builds it."""
    flag = Choice(field, lambda graph: False)
    flag.flags = values   # every other value answers False (tests/autograd/test_lowering.py checks these)
    for value in values:
        flag.alternative(value)(lambda graph: True)
    return flag


def default_value(field):
    """What the Lowering field `field` says where a backend does not set it."""
    return _FIELDS[field]


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
