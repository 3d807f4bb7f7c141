"""LoRA adapters: `LoRALinear` (a frozen Linear plus a trainable low-rank update) and `lora_(model)`.

y = base(x) + (dropout(x) @ A^T @ B^T) * alpha / r, with A (r, in_features) and B (out_features, r) in
float32. B starts at zero, so a fresh adapter leaves the model's output unchanged; A starts as
Linear's weight does (Kaiming uniform). On a base quantized by `nn.quantize_` this is QLoRA: the
quantized weights stay frozen and bit for bit unchanged, only A and B (a small fraction) learn.
"""

import math

from ..autograd import Parameter
from ..autograd.factory import empty, zeros
from . import functional as F
from . import init
from .linear import Linear
from .module import Module
from .normalization import Dropout
from .selection import select_modules


class LoRALinear(Module):
    """A Linear `base` (frozen) with a trainable rank-`r` update scaled by `alpha / r`.

    y = base(x) + (dropout(x) @ lora_A^T @ lora_B^T) * alpha / r

    Args:
        base (Linear): the layer adapted (float or quantized weight); its parameters are frozen.
        r (int, default 8): rank of the update.
        alpha (float, default 16): scale numerator (the update is multiplied by alpha / r).
        dropout (float, default 0.0): dropout on the adapter's input.
    """

    def __init__(self, base, r=8, alpha=16.0, dropout=0.0):
        super().__init__()
        if not isinstance(base, Linear):
            raise TypeError(f"LoRALinear: base must be an nn.Linear, got {type(base).__name__}")
        if isinstance(r, bool) or not isinstance(r, int) or r <= 0:
            raise ValueError(f"LoRALinear: r must be a positive integer, got {r!r}")
        base.requires_grad_(False)
        self.base, self.r, self.alpha, self.scaling = base, r, float(alpha), float(alpha) / r
        device = base.weight.device
        self.lora_A = Parameter(empty(r, base.in_features, device=device))
        self.lora_B = Parameter(zeros(base.out_features, r, device=device))
        init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.dropout = Dropout(dropout)

    @property
    def in_features(self):
        return self.base.in_features

    @property
    def out_features(self):
        return self.base.out_features

    def forward(self, x):
        update = F.linear(F.linear(self.dropout(x), self.lora_A), self.lora_B)
        return self.base(x) + update * self.scaling

    def extra_repr(self):
        return f"r={self.r}, alpha={self.alpha:g}"


def lora_(model, r=8, alpha=16.0, dropout=0.0, modules=None):
    """Freeze every parameter of `model` and wrap its chosen Linear layers in `LoRALinear`, in place.

    `modules` chooses the layers as `quantize_`'s does (None: every Linear). Returns the adapters'
    parameters (lora_A, lora_B of each), the ones to give the optimizer.
    """
    chosen = [(n, m) for n, m, _ in select_modules(model, modules, (Linear,), "lora_")]
    model.requires_grad_(False)
    adapters = []
    for name, layer in chosen:
        if not name:
            raise ValueError("lora_: the model itself is a Linear; wrap it with LoRALinear(model) instead")
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        wrapped = LoRALinear(layer, r, alpha, dropout)
        setattr(parent, attr, wrapped)
        adapters += [wrapped.lora_A, wrapped.lora_B]
    return adapters
