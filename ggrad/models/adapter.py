"""`load_lora_gguf(model, path)`: a llama.cpp LoRA adapter file (export.py describes the format) put on a model.

The file's pairs `<layer>.weight.lora_a` / `.lora_b` become `nn.LoRALinear` adapters around the model's
layers of those names, with the file's values (any GGML type, read as float32) and its `adapter.lora.alpha`
(absent or 0: alpha = r, llama.cpp's scale 1). The model then computes what llama.cpp computes with
`--lora`, and the adapters can be trained further or written again (`save_lora_gguf`). Everything is
checked before the model changes: the file must be an adapter of the model's architecture, name layers
the model has (Linear, not yet adapted), hold both halves of every pair with shapes that fit the layer.
"""

import os

import numpy as np

from .. import ggml
from ..autograd import no_grad
from ..autograd.factory import tensor
from ..ggml import gguf
from ..ggml.errors import FormatError
from ..nn import Linear
from ..nn.lora import LoRALinear

_HALVES = (".weight.lora_a", ".weight.lora_b")


def _pairs(file, where):
    """{layer name: (lora_a info, lora_b info)} of the adapter file."""
    halves = {}
    for info in file.tensors:
        for i, suffix in enumerate(_HALVES):
            if info.name.endswith(suffix):
                halves.setdefault(info.name[:-len(suffix)], [None, None])[i] = info
                break
        else:
            raise FormatError(f"{where}: tensor {info.name!r} is not half of a LoRA pair (<layer>.weight.lora_a "
                              "or .lora_b)")
    for layer, (a, b) in halves.items():
        if a is None or b is None:
            missing = f"{layer}{_HALVES[0 if a is None else 1]}"
            raise FormatError(f"{where} lacks {missing}, the other half of {layer}'s LoRA pair")
    return halves


def _matrix(file, info, where):
    """Tensor `info` of the file as a float32 numpy matrix (GGML ne [cols, rows])."""
    if not (info.dtype.is_float or info.dtype.is_quantized):
        raise FormatError(f"{where}: tensor {info.name} is {info.dtype.name}; LoRA matrices are float or quantized")
    if info.ne[2] != 1 or info.ne[3] != 1:
        raise FormatError(f"{where}: tensor {info.name} has ne={list(info.ne)}; LoRA matrices are 2-D")
    shape = (info.ne[1], info.ne[0])
    return ggml.decode(file.read_data(info), info.dtype, shape).astype(np.float32, copy=False)


def load_lora_gguf(model, path, dropout=0.0):
    """Wrap the layers that llama.cpp LoRA adapter file `path` adapts in `LoRALinear`s holding its values.

    Args:
        model: a ggrad.models model (from_gguf) of the adapter's architecture.
        path: the adapter .gguf (general.type = adapter, adapter.type = lora).
        dropout (float): the adapters' input dropout while training (default 0).

    Returns the adapters' parameters (lora_A, lora_B of each), to train further. The model's other
    parameters are left as they are (`nn.lora_` freezes them; call `model.requires_grad_(False)` first
    to train the adapters alone).

    Raises:
        FormatError: not a GGUF LoRA adapter, another architecture, a layer the model lacks or has
            adapted already (or that is not a Linear), half a pair, shapes that do not fit the layer.
    """
    where = os.fspath(path)
    file = gguf.read(path)
    meta = file.metadata
    if meta.get("general.type") != "adapter" or meta.get("adapter.type") != "lora":
        raise FormatError(f"{where} is not a LoRA adapter (general.type={meta.get('general.type')!r}, "
                          f"adapter.type={meta.get('adapter.type')!r}; 'adapter' and 'lora' expected)")
    arch = meta.get("general.architecture")
    if arch != model.config.architecture:
        raise FormatError(f"{where} adapts a {arch!r} model; this model is {model.config.architecture!r}")
    alpha = float(meta.get("adapter.lora.alpha", 0.0) or 0.0)
    layers = dict(model.named_modules())
    plan = []
    for name, (a_info, b_info) in _pairs(file, where).items():
        layer = layers.get(name)
        if isinstance(layer, LoRALinear):
            raise FormatError(f"{where}: layer {name} already has a LoRA adapter")
        if not isinstance(layer, Linear):
            what = "has no such layer" if layer is None else f"has a {type(layer).__name__} there, not a Linear"
            raise FormatError(f"{where} adapts {name}.weight, but the model {what}")
        a, b = _matrix(file, a_info, where), _matrix(file, b_info, where)
        r = a.shape[0]
        if a.shape != (r, layer.in_features) or b.shape != (layer.out_features, r):
            raise FormatError(f"{where}: {name}'s lora_a {a.shape} and lora_b {b.shape} (numpy order) do not fit "
                              f"the layer ({layer.out_features} x {layer.in_features}): (r, {layer.in_features}) and "
                              f"({layer.out_features}, r) expected")
        plan.append((name, layer, a, b))
    params = []
    for name, layer, a, b in plan:
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        r = a.shape[0]
        wrapped = LoRALinear(layer, r, alpha or float(r), dropout)
        device = wrapped.lora_A.device
        with no_grad():
            wrapped.lora_A.copy_(tensor(a, device=device))
            wrapped.lora_B.copy_(tensor(b, device=device))
        setattr(parent, attr, wrapped)
        params += [wrapped.lora_A, wrapped.lora_B]
    return params
