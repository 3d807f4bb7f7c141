"""`TransformerBlock`: a pre-LayerNorm transformer layer (GPT-2 style)."""

from .activation import GELU, ReLU, SiLU
from .attention import MultiHeadAttention
from .linear import Linear
from .module import Module
from .normalization import Dropout, LayerNorm

_ACTIVATIONS = {"gelu": lambda: GELU(), "gelu_tanh": lambda: GELU("tanh"), "relu": ReLU, "silu": SiLU}


class TransformerBlock(Module):
    """Pre-LN transformer block: self-attention then an MLP, each on a normalised residual branch.

    x = x + dropout(attn(ln1(x)));  x = x + dropout(fc2(act(fc1(ln2(x)))))

    Args:
        d_model (int): model width.
        n_heads (int): attention heads (must divide d_model).
        d_ff (int, optional): hidden width of the MLP (default 4 * d_model).
        dropout (float, default 0.0): dropout on the attention weights and on both residual branches.
        activation (str or Module, default 'gelu'): 'gelu', 'gelu_tanh', 'relu', 'silu' or a Module.
        causal (bool, default True): each position attends only to itself and earlier positions.
        bias (bool, default True): biases in the projections.
        eps (float, default 1e-5): LayerNorm epsilon.

    Shape: (B, T, d_model) -> (B, T, d_model).
    """

    def __init__(self, d_model, n_heads, d_ff=None, dropout=0.0, activation="gelu", causal=True, bias=True,
                 eps=1e-5):
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        if isinstance(activation, str):
            if activation not in _ACTIVATIONS:
                raise ValueError(f"TransformerBlock: activation must be one of {sorted(_ACTIVATIONS)} or a Module, "
                                 f"got {activation!r}")
            activation = _ACTIVATIONS[activation]()
        elif not isinstance(activation, Module):
            raise TypeError(f"TransformerBlock: activation must be a name or a Module, got "
                            f"{type(activation).__name__}")
        self.d_model, self.n_heads, self.d_ff, self.causal = d_model, n_heads, d_ff, causal
        self.ln1 = LayerNorm(d_model, eps=eps)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, bias=bias, batch_first=True)
        self.ln2 = LayerNorm(d_model, eps=eps)
        self.fc1 = Linear(d_model, d_ff, bias=bias)
        self.act = activation
        self.fc2 = Linear(d_ff, d_model, bias=bias)
        self.dropout = Dropout(dropout)

    def forward(self, x, attn_mask=None, key_padding_mask=None, kv_cache=None):
        """x (B, T, d_model); optional masks as MultiHeadAttention takes them (combined with causality);
        `kv_cache` (a LayerKVCache) makes x the next T positions after those cached (incremental decoding)."""
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=self.causal,
                         need_weights=False, kv_cache=kv_cache)
        x = x + self.dropout(a)
        return x + self.dropout(self.fc2(self.act(self.fc1(self.ln2(x)))))

    def extra_repr(self):
        return f"d_model={self.d_model}, n_heads={self.n_heads}, d_ff={self.d_ff}, causal={self.causal}"
