"""`ModelConfig`: a decoder's hyperparameters, read from (and written as) llama.cpp's GGUF metadata keys.

llama.cpp names each hyperparameter `<architecture>.<key>` (`llama.embedding_length`,
`qwen2.attention.head_count_kv`, ...). The keys a model cannot be built without are required: a file that
lacks one raises FormatError naming it. The others take llama.cpp's defaults (key/value heads = heads,
head size = width / heads, RoPE base 10000 over the whole head, no RoPE scaling, no sliding window).
RoPE scaling is linear or YaRN (`rope.scaling.*`: type, factor, original context, YaRN's extrapolation
factor, attention factor and betas as convert_hf_to_gguf.py writes them from transformers' `rope_parameters`;
`rope.scaling.attn_factor` scales every rotation, as llama.cpp). A sliding window
(`attention.sliding_window`, Mistral's) lets each query see the keys of the last that many positions.
"""

import math
from dataclasses import dataclass, field

import numpy as np

from ..ggml.errors import FormatError

ARCHITECTURES = ("llama", "qwen2")
# llama.cpp's RoPE layout per architecture: llama's q/k weights are stored permuted for adjacent pairs
ROPE_MODES = {"llama": "normal", "qwen2": "neox"}


@dataclass
class ModelConfig:
    """The hyperparameters of a llama-family decoder (see the module docstring)."""
    architecture: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    context_length: int
    norm_eps: float
    head_dim: int
    rope_theta: float = 10000.0
    rope_dims: int = 0                 # dims of each head rotated (0: all)
    rope_scaling: str = "none"        # "none", "linear" or "yarn"
    rope_factor: float = 1.0           # the scaling's factor (positions divided by it)
    rope_original_context: int = 0     # YaRN's original context
    rope_attn_factor: float = 1.0      # rope.scaling.attn_factor: every rotation scaled by it
    yarn_ext_factor: float = 1.0       # YaRN's extrapolation mix (GGML's ext_factor)
    yarn_attn_factor: float = 0.0      # YaRN's attention factor (transformers'; 0: 1 + 0.1 ln factor)
    yarn_beta_fast: float = 32.0       # YaRN's correction range, in rotations
    yarn_beta_slow: float = 1.0
    sliding_window: int = 0            # keys of the last this many positions per query (0: all)
    attention_bias: bool = False       # q/k/v biases (Qwen2)
    tie_word_embeddings: bool = False  # no output.weight: the output layer is token_embd
    extra: dict = field(default_factory=dict, repr=False)   # the file's other metadata, kept for export

    @property
    def rope_mode(self):
        return ROPE_MODES[self.architecture]

    @property
    def rotary_dims(self):
        return self.rope_dims or self.head_dim

    @classmethod
    def from_metadata(cls, metadata, where="GGUF file"):
        """The config of a llama.cpp GGUF file's metadata (a dict of key -> value)."""
        arch = metadata.get("general.architecture")
        if arch is None:
            raise FormatError(f"{where} has no general.architecture key: not a llama.cpp model file")
        if arch not in ARCHITECTURES:
            raise FormatError(f"{where} holds a {arch!r} model; ggrad.models runs the architectures "
                              f"{', '.join(ARCHITECTURES)}")

        def get(key, default=None, required=False):
            value = metadata.get(f"{arch}.{key}", default)
            if required and value is None:
                raise FormatError(f"{where} lacks the metadata key {arch}.{key}, which a {arch} model needs")
            return value.item() if isinstance(value, np.generic) else value

        sizes = {key: int(get(key, required=True)) for key in ("embedding_length", "attention.head_count",
                                                                "block_count", "feed_forward_length", "context_length")}
        sizes["attention.head_count_kv"] = int(get("attention.head_count_kv", sizes["attention.head_count"]))
        bad = [f"{arch}.{key}={value}" for key, value in sizes.items() if value <= 0]
        if bad:
            raise FormatError(f"{where} has {', '.join(bad)}: sizes must be positive")
        hidden, heads = sizes["embedding_length"], sizes["attention.head_count"]
        scaling = get("rope.scaling.type", "none")
        factor = float(get("rope.scaling.factor", 0.0) or 0.0)
        if scaling == "none" and get("rope.scale_linear") is not None:   # older files
            scaling, factor = "linear", float(get("rope.scale_linear"))
        if scaling not in ("none", "linear", "yarn"):
            raise FormatError(f"{where} has {arch}.rope.scaling.type={scaling!r}; ggrad.models knows none, linear "
                              "and yarn")
        window = int(get("attention.sliding_window", 0) or 0)
        if window < 0:
            raise FormatError(f"{where} has {arch}.attention.sliding_window={window}: it must be positive (or 0 "
                              "for none)")
        return cls(
            architecture=arch,
            vocab_size=int(get("vocab_size", 0) or 0),
            hidden_size=hidden,
            num_layers=sizes["block_count"],
            num_heads=heads,
            num_kv_heads=sizes["attention.head_count_kv"],
            intermediate_size=sizes["feed_forward_length"],
            context_length=sizes["context_length"],
            norm_eps=float(get("attention.layer_norm_rms_epsilon", required=True)),
            head_dim=int(get("attention.key_length", hidden // heads)),
            rope_theta=float(get("rope.freq_base", 10000.0)),
            rope_dims=int(get("rope.dimension_count", 0)),
            rope_scaling=scaling,
            rope_factor=factor if scaling != "none" and factor > 0 else 1.0,
            rope_original_context=int(get("rope.scaling.original_context_length", 0)),
            rope_attn_factor=float(get("rope.scaling.attn_factor", 1.0)),
            yarn_ext_factor=float(get("rope.scaling.yarn_ext_factor", 1.0)),
            yarn_attn_factor=float(get("rope.scaling.yarn_attn_factor", 0.0)),
            yarn_beta_fast=float(get("rope.scaling.yarn_beta_fast", 32.0)),
            yarn_beta_slow=float(get("rope.scaling.yarn_beta_slow", 1.0)),
            sliding_window=window,
            attention_bias=arch == "qwen2",
            extra=dict(metadata),
        )

    def metadata(self):
        """llama.cpp's metadata keys for this config (the architecture's hyperparameters; the file's other
        keys, tokenizer and general.*, come from `extra`)."""
        a = self.architecture
        keys = {**self.extra, "general.architecture": a,
                f"{a}.context_length": np.uint32(self.context_length),
                f"{a}.embedding_length": np.uint32(self.hidden_size),
                f"{a}.block_count": np.uint32(self.num_layers),
                f"{a}.feed_forward_length": np.uint32(self.intermediate_size),
                f"{a}.attention.head_count": np.uint32(self.num_heads),
                f"{a}.attention.head_count_kv": np.uint32(self.num_kv_heads),
                f"{a}.attention.layer_norm_rms_epsilon": np.float32(self.norm_eps),
                f"{a}.rope.freq_base": np.float32(self.rope_theta),
                f"{a}.rope.dimension_count": np.uint32(self.rotary_dims)}
        if self.vocab_size:
            keys[f"{a}.vocab_size"] = np.uint32(self.vocab_size)
        if self.head_dim != self.hidden_size // self.num_heads:
            keys[f"{a}.attention.key_length"] = np.uint32(self.head_dim)
            keys[f"{a}.attention.value_length"] = np.uint32(self.head_dim)
        if self.rope_scaling != "none":
            keys[f"{a}.rope.scaling.type"] = self.rope_scaling
            keys[f"{a}.rope.scaling.factor"] = np.float32(self.rope_factor)
            if self.rope_original_context:
                keys[f"{a}.rope.scaling.original_context_length"] = np.uint32(self.rope_original_context)
        if self.rope_scaling == "yarn":
            for key, value, default in (("yarn_ext_factor", self.yarn_ext_factor, 1.0),
                                        ("yarn_attn_factor", self.yarn_attn_factor, 0.0),
                                        ("yarn_beta_fast", self.yarn_beta_fast, 32.0),
                                        ("yarn_beta_slow", self.yarn_beta_slow, 1.0)):
                if value != default:
                    keys[f"{a}.rope.scaling.{key}"] = np.float32(value)
        if self.rope_attn_factor != 1.0:
            keys[f"{a}.rope.scaling.attn_factor"] = np.float32(self.rope_attn_factor)
        if self.sliding_window:
            keys[f"{a}.attention.sliding_window"] = np.uint32(self.sliding_window)
        return keys

    def rope_settings(self):
        """GGML rope_ext's keyword settings (`ops.rope`'s **yarn) of this config's RoPE scaling."""
        settings = {"attn_factor": self.rope_attn_factor}
        if self.rope_scaling != "none":
            settings["freq_scale"] = 1.0 / self.rope_factor
        if self.rope_scaling == "yarn":
            # GGML scales by attn_factor * (1 + 0.1 ln factor); a given YaRN attention factor replaces the second
            mscale = 1.0 + 0.1 * math.log(self.rope_factor) if self.rope_factor > 0 else 1.0
            if self.yarn_attn_factor:
                settings["attn_factor"] *= self.yarn_attn_factor / mscale
            settings.update(ext_factor=self.yarn_ext_factor, beta_fast=self.yarn_beta_fast,
                            beta_slow=self.yarn_beta_slow,
                            n_ctx_orig=self.rope_original_context or self.context_length)
        return settings
