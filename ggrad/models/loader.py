"""`from_gguf(path)`: a llama.cpp GGUF model file as a `LlamaModel`, each tensor in the GGML type it was stored in.

The file is validated by `ggrad.ggml.gguf.read` (structure, sizes, truncation), its metadata by
`ModelConfig.from_metadata` (architecture, required keys), and its tensors here: every tensor the
architecture needs must be there with the shape the config implies (a missing or misshapen one raises
FormatError naming it), in a type GGML multiplies (float or quantized). `output.weight` absent means the
output layer is tied to `token_embd.weight`; `rope_freqs.weight` (Llama 3's RoPE scaling) is used where
present. Tensors llama.cpp's loader would not know are refused, as llama.cpp refuses them. On the CPU the
tensors are read in place from the memory-mapped file, as llama.cpp maps its files (`ggml.mapped`: page
cache rather than a copy; a repacked weight's own bytes are given back to the kernel once repacked).
"""

import os

from ..autograd.raw import from_mapped, from_raw
from ..autograd.repacked_weights import keep_repacked
from ..ggml import device as as_device
from ..ggml import gguf
from ..ggml.errors import FormatError
from ..ggml.mapped import MappedGGUF, can_map
from ..nn.quantized import repack_
from .config import ModelConfig
from .llama import LlamaModel, Weights

_BLOCK_WEIGHTS = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
                  "ffn_down")
_BIASES = ("attn_q", "attn_k", "attn_v")


def expected_tensors(config):
    """{GGUF tensor name: required} of a model of `config` (output.weight and rope_freqs.weight optional)."""
    names = {"token_embd.weight": True, "output_norm.weight": True, "output.weight": False,
             "rope_freqs.weight": False}
    for i in range(config.num_layers):
        names.update({f"blk.{i}.{w}.weight": True for w in _BLOCK_WEIGHTS})
        if config.attention_bias:
            names.update({f"blk.{i}.{w}.bias": True for w in _BIASES})
    return names


def _mapped(file):
    """`file` mapped into memory, or None where it cannot be (alignment, a file system without mmap)."""
    if not can_map(file):
        return None
    try:
        return MappedGGUF(file)
    except OSError:
        return None


def from_gguf(path, device=None, context=None, repack=True, mmap=True):
    """The model of llama.cpp GGUF file `path` (architectures llama and qwen2).

    Args:
        path: the .gguf file.
        device (optional): where the weights live (default CPU).
        context (int, optional): the longest sequence generate keeps, the KV cache's size (default the
            file's context length, at most 2048).
        repack (bool): on the CPU, multiply the quantized weights that GGML's CPU kernels have an
            interleaved layout for (q4_0, q4_K, iq4_nl, ...) through such copies, as llama.cpp does
            (`nn.repack_`: faster; the file's bytes of those weights stay mapped but are not held once
            repacked). False multiplies the file's layout.
        mmap (bool): on the CPU, read the tensors in place from the file mapped into memory, as llama.cpp
            does (`ggml.mapped`; the file must not be changed in place while the model lives). False reads a
            copy of each (llama.cpp's --no-mmap).

    Raises:
        FormatError: not a GGUF file, truncated or damaged, an architecture other than llama and qwen2, a
            required metadata key or tensor missing, a tensor of the wrong shape or of a type GGML cannot
            multiply.
    """
    where = os.fspath(path)
    file = gguf.read(path)
    config = ModelConfig.from_metadata(file.metadata, where)
    expected = expected_tensors(config)
    missing = [name for name, required in expected.items() if required and name not in file.by_name]
    if missing:
        shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
        raise FormatError(f"{where} lacks tensors a {config.num_layers}-layer {config.architecture} model needs: "
                          f"{shown}")
    unknown = [info.name for info in file.tensors if info.name not in expected]
    if unknown:
        raise FormatError(f"{where} holds tensors a {config.architecture} model of {config.num_layers} layers does "
                          f"not have: {', '.join(unknown[:8])}")
    embd = file.by_name["token_embd.weight"]
    if len(embd.shape) != 2:
        raise FormatError(f"{where}: token_embd.weight has shape {embd.shape}; (vocab, hidden) expected")
    if config.vocab_size and config.vocab_size != embd.shape[0]:
        raise FormatError(f"{where}: {config.architecture}.vocab_size is {config.vocab_size} but token_embd.weight "
                          f"has {embd.shape[0]} rows")
    config.vocab_size = embd.shape[0]
    config.tie_word_embeddings = "output.weight" not in file.by_name
    for info in file.tensors:
        if not (info.dtype.name in ("f32", "f16", "bf16") or info.dtype.is_quantized):
            raise FormatError(f"{where}: tensor {info.name} is {info.dtype.name}; a model's weights are float or "
                              "quantized")
    mapped = _mapped(file) if mmap and as_device(device).is_cpu else None
    loaded = {info.name: from_mapped(mapped, info) if mapped is not None
              else from_raw(file.read_data(info), info.dtype, info.shape, device) for info in file.tensors}
    try:
        model = LlamaModel(config, Weights(loaded, device), context)
    except ValueError as e:   # ShapeError: a tensor's shape disagrees with the metadata
        raise FormatError(f"{where}: {e}") from None
    if repack:
        repack_(model)
        if config.tie_word_embeddings:   # the output layer's product reads token_embd
            keep_repacked(model.token_embd.weight)
    return model
