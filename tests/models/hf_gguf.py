"""Tiny random transformers models written to GGUF as llama.cpp's convert_hf_to_gguf.py writes them.

`write_gguf(hf_model, path, dtype)` uses gguf-py's GGUFWriter: llama.cpp's tensor names, its metadata keys,
the q/k rows of a llama permuted for llama.cpp's adjacent-pair RoPE (`permute`), Llama 3's RoPE scaling as a
`rope_freqs.weight` tensor, norms and biases in float32 and the 2-D weights in `dtype` (quantized by gguf-py
where it quantizes that type, else by GGML as llama-quantize does). A tiny GPT-2-style vocabulary is written
too so that the file is complete. Nothing is downloaded.
"""

import math

import numpy as np
import torch
import transformers
from gguf import GGMLQuantizationType, GGUFWriter, RopeScalingType, quants

import ggrad.ggml as gg

_NAMES = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
          "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
          "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
_FILE_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9, "q4_K": 15, "q5_K": 17,
               "q6_K": 18, "bf16": 32}


def tiny_config(arch="llama", vocab=96, hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, tied=False,
                rope_theta=10000.0, llama3_scaling=False, linear_scaling=None, yarn=None, sliding_window=None,
                context=128):
    """A transformers config of a tiny model (float32). `arch` "mistral" is transformers' MistralForCausalLM
    (llama.cpp's llama architecture), with `sliding_window`; `yarn`: YaRN's rope_parameters beside its type."""
    rope = {"rope_theta": rope_theta, "rope_type": "default"}
    if linear_scaling:
        rope = {"rope_theta": rope_theta, "rope_type": "linear", "factor": float(linear_scaling)}
    if yarn:
        rope = {"rope_theta": rope_theta, "rope_type": "yarn", **yarn}
    if llama3_scaling:
        rope = {"rope_theta": rope_theta, "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
    kwargs = dict(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                  num_key_value_heads=kv_heads, intermediate_size=intermediate, max_position_embeddings=context,
                  rms_norm_eps=1e-5, tie_word_embeddings=tied, rope_parameters=rope, torch_dtype=torch.float32)
    if arch == "mistral":
        kwargs["sliding_window"] = sliding_window
    cls = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config,
           "mistral": transformers.MistralConfig}[arch]
    config = cls(**kwargs)
    config._attn_implementation = "eager"
    return config


def tiny_model(seed=0, **kwargs):
    """A transformers LlamaForCausalLM / Qwen2ForCausalLM of `tiny_config(**kwargs)` with random weights (norms
    and biases too, so that every tensor matters)."""
    torch.manual_seed(seed)
    config = tiny_config(**kwargs)
    cls = {"llama": transformers.LlamaForCausalLM, "qwen2": transformers.Qwen2ForCausalLM,
           "mistral": transformers.MistralForCausalLM}[kwargs.get("arch", "llama")]
    model = cls(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_(1.0 + 0.1 * torch.randn_like(p) if name.endswith("norm.weight") else 0.1 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.08)
    return model


def permute(w, n_head, n_head_kv=None):
    """convert_hf_to_gguf's permutation of llama's q/k rows: each head's two halves interleaved."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(config):
    rope = config.rope_parameters
    base, dim = rope["rope_theta"], config.hidden_size // config.num_attention_heads
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old = rope["original_max_position_embeddings"]
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            out.append(1.0)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def gguf_tensors(hf_model):
    """{llama.cpp name: float32 numpy array} of a transformers model, q/k permuted for llama."""
    config = hf_model.config
    arch = _gguf_arch(config)
    state = {k: v.detach().float().numpy() for k, v in hf_model.state_dict().items()}
    out = {"token_embd.weight": state["model.embed_tokens.weight"], "output_norm.weight": state["model.norm.weight"]}
    if not config.tie_word_embeddings:
        out["output.weight"] = state["lm_head.weight"]
    for i in range(config.num_hidden_layers):
        for hf, ours in _NAMES.items():
            for kind in ("weight", "bias"):
                key = f"model.layers.{i}.{hf}.{kind}"
                if key not in state:
                    continue
                value = state[key]
                if arch == "llama" and ours == "attn_q":
                    value = permute(value, config.num_attention_heads, config.num_attention_heads)
                elif arch == "llama" and ours == "attn_k":
                    value = permute(value, config.num_attention_heads, config.num_key_value_heads)
                out[f"blk.{i}.{ours}.{kind}"] = value
    if arch == "llama" and config.rope_parameters.get("rope_type") == "llama3":
        out["rope_freqs.weight"] = llama3_rope_factors(config)
    return out


def encode(values, dtype):
    """(bytes as uint8, GGMLQuantizationType) of float32 `values` in GGML type `dtype`."""
    qtype = GGMLQuantizationType[dtype.upper()]
    if dtype == "f32":
        return values.astype(np.float32), qtype
    if dtype == "f16":
        return values.astype(np.float16), qtype
    try:
        return quants.quantize(values.astype(np.float32), qtype), qtype
    except (quants.QuantError, NotImplementedError):
        return gg.encode(values, dtype).view(np.uint8).reshape(values.shape[0], -1), qtype


def _gguf_arch(config):
    """llama.cpp's architecture of a transformers config: Mistral's is llama's."""
    return "llama" if config.model_type == "mistral" else config.model_type


def write_gguf(hf_model, path, dtype="f32", vocab=True):
    """Write `hf_model` to `path` as llama.cpp's converter would, the 2-D weights in GGML type `dtype`
    (and, as the converter does not, a Mistral's sliding window as `llama.attention.sliding_window`)."""
    config = hf_model.config
    arch = _gguf_arch(config)
    writer = GGUFWriter(str(path), arch)
    writer.add_name("tiny-test")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    writer.add_vocab_size(config.vocab_size)
    writer.add_file_type(_FILE_TYPES[dtype])
    if config.rope_parameters.get("rope_type") == "linear":
        writer.add_rope_scaling_type(RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(config.rope_parameters["factor"])
    if config.rope_parameters.get("rope_type") == "yarn":   # as convert_hf_to_gguf.py writes YaRN
        rope = config.rope_parameters
        writer.add_rope_scaling_type(RopeScalingType.YARN)
        writer.add_rope_scaling_factor(rope["factor"])
        writer.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
        if rope.get("attention_factor") is not None:
            writer.add_rope_scaling_yarn_attn_factor(rope["attention_factor"])
        if rope.get("beta_fast") is not None:
            writer.add_rope_scaling_yarn_beta_fast(rope["beta_fast"])
        if rope.get("beta_slow") is not None:
            writer.add_rope_scaling_yarn_beta_slow(rope["beta_slow"])
    if getattr(config, "sliding_window", None):
        writer.add_sliding_window(config.sliding_window)
    if vocab:
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("default")
        writer.add_token_list([f"<t{i}>" for i in range(config.vocab_size)])
        writer.add_token_types([1] * config.vocab_size)
        writer.add_token_merges(["< t"])   # llama.cpp needs the key; an empty array is not written
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
    for name, value in gguf_tensors(hf_model).items():
        if value.ndim == 1:
            writer.add_tensor(name, value.astype(np.float32))
        else:
            data, qtype = encode(value, dtype)
            writer.add_tensor(name, data, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
