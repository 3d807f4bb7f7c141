"""Copies of a model and of its optimizer on other devices, for data-parallel training.

A replica has the model's structure (a deep copy) with its parameters and buffers copied bitwise onto
the device; its optimizer is the same class with the same param groups and state, over the replica's
parameters. Tensors a module keeps as plain attributes (not parameters or buffers) are copied too,
onto the CPU.
"""

import copy
from collections import defaultdict

import numpy as np

from .. import nn
from ..autograd.factory import tensor


def _on(t, device):
    """A leaf copy of `t` on `device`, bit for bit (bf16 travels as f32, which holds it exactly)."""
    return tensor(np.asarray(t.detach().numpy()), dtype=t.dtype, device=device)


def replicate_module(model, device):
    """A copy of `model` whose parameters and buffers live on `device`."""
    memo = {}
    for p in model.parameters():
        memo[id(p)] = nn.Parameter(_on(p, device), requires_grad=p.requires_grad)
    for b in model.buffers():
        memo[id(b)] = _on(b, device)
    return copy.deepcopy(model, memo)


def replicate_optimizer(optimizer, model, replica):
    """`optimizer` (over `model`'s parameters) for `replica`: same class, groups, hyper-parameters, state."""
    mapping = {id(p): q for p, q in zip(model.parameters(), replica.parameters())}
    clone = copy.copy(optimizer)   # the class and what it pickles (defaults, state, param_groups), shared
    clone.defaults = copy.deepcopy(optimizer.defaults)
    clone.param_groups = [dict(copy.deepcopy({k: v for k, v in g.items() if k != "params"}),
                               params=[mapping[id(p)] for p in g["params"]]) for g in optimizer.param_groups]
    clone.state = defaultdict(dict)
    if optimizer.state:
        clone.load_state_dict(optimizer.state_dict())
    return clone


def check_optimizer_covers(optimizer, model):
    """Raise unless every parameter the optimizer updates belongs to `model`."""
    own = {id(p) for p in model.parameters()}
    for group in optimizer.param_groups:
        for p in group["params"]:
            if id(p) not in own:
                raise ValueError(f"DataParallel: the optimizer updates a parameter of shape {p.shape} that is not "
                                 "one of the model's; build the optimizer over model.parameters()")


def sync_hyperparameters(source, targets):
    """Copy the hyper-parameters of each param group of `source` (lr, ...) to the same groups of `targets`."""
    for target in targets:
        for src, dst in zip(source.param_groups, target.param_groups):
            for key, value in src.items():
                if key != "params":
                    dst[key] = value
