"""Writing models back to llama.cpp: `save_gguf` (the model, LoRA adapters merged) and `save_lora_gguf` (the adapters).

`save_gguf` writes every tensor under its llama.cpp name, a LoRA-wrapped weight merged on the host
(W + alpha/r * B @ A, from the dequantized W), in the GGML type asked for (2-D weights; norms, biases and
RoPE factors stay float32, as llama.cpp's converter keeps them) or, without one, in the type each tensor had;
the metadata is the file's own (tokenizer included) with the hyperparameters and general.file_type updated.

`save_lora_gguf` writes llama.cpp's LoRA adapter file (what its convert_lora_to_gguf.py makes and
`llama-cli --lora` applies): general.type = "adapter", adapter.type = "lora", adapter.lora.alpha (float32),
and per adapted weight `<name>.weight.lora_a` (GGML ne [in, r]: numpy (r, in), ggrad's lora_A) and
`<name>.weight.lora_b` (ne [r, out]: ggrad's lora_B), float32. llama.cpp scales each pair by alpha / r with r
read from lora_a; adapters of another alpha have their lora_b rescaled so that the product is theirs.
"""

import numpy as np

from .. import ggml
from ..autograd import no_grad
from ..autograd.raw import to_raw
from ..ggml import gguf
from ..nn import Embedding, Linear, RMSNorm
from ..nn.lora import LoRALinear

# llama.cpp's general.file_type (enum llama_ftype) of a file whose weights are mostly of one type
FILE_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9, "q2_K": 10, "q3_K": 12,
              "q4_K": 15, "q5_K": 17, "q6_K": 18, "iq2_xxs": 19, "iq2_xs": 20, "iq3_xxs": 23, "iq1_s": 24,
              "iq4_nl": 25, "iq3_s": 26, "iq2_s": 28, "iq4_xs": 30, "bf16": 32}


def _host(t):
    """A float32 numpy copy of `t`, whatever its GGML type."""
    return ggml.decode(to_raw(t), t.dtype, t.shape).astype(np.float32, copy=False)


def _merged(layer):
    """The float32 weight of a LoRALinear with its update added: W + alpha/r * B @ A."""
    w = _host(layer.base.weight)
    return w + layer.scaling * (_host(layer.lora_B) @ _host(layer.lora_A))


def _tensors(model):
    """(llama.cpp name, tensor or float32 array, its type now) of `model`, LoRA adapters merged."""
    out = []
    for name, module in model.named_modules():
        if isinstance(module, LoRALinear):
            out.append((f"{name}.weight", _merged(module), module.base.weight.dtype))
            if module.base.bias is not None:
                out.append((f"{name}.bias", module.base.bias, module.base.bias.dtype))
        elif isinstance(module, (Linear, Embedding, RMSNorm)) and ".base" not in f".{name}":
            for attr in ("weight", "bias"):
                t = getattr(module, attr, None)
                if t is not None:
                    out.append((f"{name}.{attr}", t, t.dtype))
    rope_freqs = getattr(model, "rope_freqs", None)
    if rope_freqs is not None:
        out.append(("rope_freqs.weight", rope_freqs.weight, rope_freqs.weight.dtype))
    return out


def _encoded(name, value, current, wanted):
    """(GGML type, bytes) of one tensor written as `wanted` (None: as it is)."""
    is_array = isinstance(value, np.ndarray)
    shape = value.shape if is_array else tuple(value.shape)
    target = current if wanted is None else wanted
    if len(shape) < 2 or name == "rope_freqs.weight":
        target = ggml.f32     # norms, biases, RoPE factors
    if target.is_quantized and shape[-1] % target.block_size:
        target = ggml.as_dtype("f16")   # llama.cpp's fallback for rows that are not whole blocks
    if not is_array and target is current:
        return target, to_raw(value)
    values = value if is_array else _host(value)
    return target, ggml.encode(values, target).view(np.uint8).reshape(-1)


def save_gguf(model, path, type=None):  # noqa: A002 (the issue's name)
    """Write `model` (a ggrad.models model, LoRA adapters merged) as a GGUF file llama.cpp loads.

    Args:
        model: what `from_gguf` returned (or a LlamaModel built from a ModelConfig).
        path: the file to write (atomically).
        type (str, optional): the GGML type of the 2-D weights ("f32", "f16", "bf16", "q8_0", "q4_0",
            "q4_K", ...); default: each tensor's own type (a merged quantized weight re-quantized to it).
    """
    wanted = None if type is None else ggml.as_dtype(type)
    metadata = model.config.metadata()
    if wanted is not None:
        metadata["general.file_type"] = np.uint32(FILE_TYPES.get(wanted.name, 0))
    metadata.pop("general.alignment", None)   # the writer's own
    tensors = []
    with no_grad():
        for name, value, current in _tensors(model):
            dtype, raw = _encoded(name, value, current, wanted)
            shape = value.shape
            tensors.append((name, dtype, list(reversed(shape)), raw))
    gguf.write(path, metadata, tensors)


def save_lora_gguf(model, path):
    """Write the LoRA adapters of `model` (nn.lora_ on a ggrad.models model) as a llama.cpp adapter file.

    Raises ValueError when the model has no LoRA adapter.
    """
    adapters = [(name, m) for name, m in model.named_modules() if isinstance(m, LoRALinear)]
    if not adapters:
        raise ValueError("save_lora_gguf: the model has no LoRA adapters (wrap its layers with ggrad.nn.lora_ "
                         "first)")
    alpha = adapters[0][1].alpha
    metadata = {"general.architecture": model.config.architecture, "general.type": "adapter",
                "adapter.type": "lora", "adapter.lora.alpha": np.float32(alpha)}
    name = model.config.extra.get("general.name")
    if isinstance(name, str):
        metadata["general.name"] = name
    tensors = []
    with no_grad():
        for layer_name, layer in adapters:
            a, b = _host(layer.lora_A), _host(layer.lora_B)
            b = b * np.float32(layer.alpha / alpha)   # llama.cpp applies the file's one alpha to every pair
            tensors.append((f"{layer_name}.weight.lora_a", ggml.f32, [a.shape[1], a.shape[0]], a.view(np.uint8)))
            tensors.append((f"{layer_name}.weight.lora_b", ggml.f32, [b.shape[1], b.shape[0]],
                            np.ascontiguousarray(b, dtype=np.float32).view(np.uint8)))
    gguf.write(path, metadata, tensors)
