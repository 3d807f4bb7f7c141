"""`ggrad.nn.quantize_(model, "q4_0")`: a model's weights replaced, in place, by quantized GGML tensors.

The weights of Linear, Embedding and MultiHeadAttention (its in-projection; its out_proj is a Linear)
become `QuantizedParameter`s holding GGML's blocks; the layers' forward is unchanged, because
`F.linear` runs GGML's mul_mat on a quantized weight and `F.embedding` GGML's get_rows. A quantized
weight is frozen: it never requires a gradient, and asking it to (`requires_grad_(True)`, also through
`model.requires_grad_()`) raises an error naming the parameter. Gradients still flow to the inputs,
the biases and every other parameter (training adapters on a frozen quantized base: `nn.lora`).
Build the optimizer after quantizing: the replaced Parameters are no longer the model's.

`repack_(model)` keeps the quantized weights on the CPU also in the interleaved layout of GGML's fast
CPU kernels (q4_0, q4_K, iq4_nl, ...: `ggrad.autograd.repacked_weights`), as llama.cpp does.
"""

import warnings

from ..autograd import Parameter
from ..autograd.ops import quantize
from ..autograd.repacked_weights import forget_repacked, keep_repacked
from ..ggml import as_dtype, lib
from ..ggml.errors import DTypeError, ShapeError
from .attention import MultiHeadAttention
from .linear import Linear
from .selection import select_modules
from .sparse import Embedding

# The weights quantize_ replaces, per layer type.
QUANTIZABLE = {Linear: ("weight",), Embedding: ("weight",),
               MultiHeadAttention: ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight")}


class QuantizedParameter(Parameter):
    """A frozen module weight in a quantized GGML type; `name` is its dotted name in the quantized model
    and `layer` the type of the layer holding it (for the error messages)."""

    __slots__ = ("name", "layer")

    def requires_grad_(self, requires_grad=True):
        if requires_grad:
            raise RuntimeError(f"{self.name} (of a {self.layer}) is quantized ({self.dtype.name}) and frozen: it cannot require "
                               "gradients (train adapters on it with ggrad.nn.lora, or load a float copy)")
        return self


def _weights(module):
    """(attribute, Parameter) of `module`'s quantizable float weights."""
    for kind, names in QUANTIZABLE.items():
        if isinstance(module, kind):
            return [(n, module._parameters[n]) for n in names
                    if module._parameters.get(n) is not None and module._parameters[n].dtype.is_float]
    return []


def quantize_(model, dtype, modules=None, imatrix=None):
    """Quantize the weights of `model`'s layers to the GGML type `dtype`, in place; returns `model`.

    Args:
        model (Module): its Linear, Embedding and MultiHeadAttention layers are candidates.
        dtype (str | DType): a quantized GGML type ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_K", ...).
        modules: which layers: None (every candidate), a list of dotted names, a layer type or tuple of
            types, or a predicate `(name, module) -> bool`.
        imatrix (dict, optional): {weight name: importance matrix} for types that need one (iq2_xxs, ...).

    A weight whose row length the type's block size does not divide stays float, with a warning naming
    it; a layer named explicitly in `modules` raises ShapeError instead. A weight shared by several
    layers (tied embeddings) is quantized once and stays shared.
    """
    dt = as_dtype(dtype)
    if not dt.is_quantized:
        raise DTypeError(f"quantize_: {dt.name} is not a quantized GGML type (e.g. q8_0, q4_0, q5_1, q4_K)")
    imatrix = imatrix or {}
    plan, skipped, seen = [], [], set()   # checked in full before anything changes: an error leaves model as it was
    for name, module, explicit in select_modules(model, modules, tuple(QUANTIZABLE), "quantize_"):
        for attr, param in _weights(module):
            full = f"{name}.{attr}" if name else attr
            if param.shape[-1] % dt.block_size:
                why = (f"{full} ({type(module).__name__}) of shape {param.shape}: rows of "
                       f"{param.shape[-1]} values are not a whole number of {dt.name} blocks of {dt.block_size}")
                if explicit:
                    raise ShapeError(f"quantize_: cannot quantize {why}")
                skipped.append(why)
            elif id(param) not in seen:
                if lib.ggml_quantize_requires_imatrix(dt.value) and full not in imatrix:
                    raise DTypeError(f"quantize_: {dt.name} needs an importance matrix per weight; imatrix has "
                                     f"none for {full}")
                seen.add(id(param))
                plan.append((full, module, param))
    done = {}        # id(old parameter) -> (it, its QuantizedParameter): tied weights stay tied
    for full, module, param in plan:
        q = QuantizedParameter(quantize(param, dt, imatrix=imatrix.get(full)), requires_grad=False)
        q.name, q.layer = full, type(module).__name__
        done[id(param)] = (param, q)
    _retie(model, done)
    if skipped:
        warnings.warn("quantize_: left in float (not quantized): " + "; ".join(skipped), stacklevel=2)
    return model


def _retie(model, done):
    """Point every holder of a replaced Parameter (tied weights too, inside or outside the chosen layers) at its
    quantized replacement."""
    for module in model.modules():
        for attr, param in module._parameters.items():
            if param is not None and id(param) in done:
                module._parameters[attr] = done[id(param)][1]


def repack_(model, enabled=True, modules=None):
    """Multiply the quantized weights of `model`'s Linear and MultiHeadAttention layers on the CPU through
    copies in GGML's CPU_REPACK layout (its interleaved kernels: q4_0 decoding 1.2-1.7x faster,
    benchmarks/README.md), or (`enabled=False`) stop doing so.

    Each such weight costs its bytes twice: its own stay for reads, exports and gradients. Embedding tables
    are left alone (GGML reads them by rows, never through the repacked layout), as are types and shapes
    GGML has no layout for (q8_0 on x86, fewer rows than a multiple of 8). `modules` chooses the layers as
    `quantize_`'s does. Returns the dotted names of the weights repacked.
    """
    done, seen = [], set()
    for name, module, _ in select_modules(model, modules, (Linear, MultiHeadAttention), "repack_"):
        for attr, param in module._parameters.items():
            if not isinstance(param, QuantizedParameter) or id(param) in seen:
                continue
            seen.add(id(param))
            if not enabled:
                forget_repacked(param)
            elif keep_repacked(param):
                done.append(f"{name}.{attr}" if name else attr)
    return done
