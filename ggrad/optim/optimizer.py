"""`Optimizer`: the bookkeeping shared by every optimizer (param groups, per-parameter state, state dicts).

The math of each optimizer is a pure function (`sgd(...)`, `adamw(...)`) that schedules GGML nodes;
`step()` adds every update to the pending graph and computes forward, backward and updates as one
graph per device (`ggrad.realize`).
"""

from __future__ import annotations

from collections import defaultdict
from copy import deepcopy
from typing import Any, Callable, Iterable, Union

import numpy as np

from .. import ggml
from ..autograd import Tensor, grad_mode, realize, replay_notes
from . import fused_updates
from ..autograd.factory import tensor, zeros_like

ParamsT = Union[Iterable[Tensor], Iterable[dict[str, Any]]]
"""What optimizers take: parameters, or parameter groups (dicts with "params" and per-group options)."""


class _RequiredParameter:
    """Marks a hyper-parameter that has no default (`lr` of a group that names none)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


_LABELS = {"lr": "learning rate", "eps": "epsilon value"}   # PyTorch's wording; others read "<name> value"


def check_non_negative(group, names):
    """Raise PyTorch's ValueError for the first of `names` in `group` that is negative."""
    for name in names:
        if not 0.0 <= group[name]:
            raise ValueError(f"Invalid {_LABELS.get(name, name + ' value')}: {group[name]}")


def check_betas(group):
    """Raise PyTorch's ValueError unless `group["betas"]` is a pair in [0, 1)."""
    betas = group["betas"]
    if len(betas) != 2:
        raise ValueError(f"Invalid betas: {betas} (expected a pair (beta1, beta2))")
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")


def check_adam_like(group, extra=()):
    """PyTorch's checks of an Adam-family group: lr and eps non-negative, betas in [0, 1), weight_decay and
    the `extra` names non-negative."""
    check_non_negative(group, ("lr", "eps"))
    check_betas(group)
    check_non_negative(group, ("weight_decay",) + tuple(extra))


def decayed_gradient(param, group):
    """(param, gradient) in float32 with the group's weight decay: decoupled (the parameter scaled by
    1 - lr * weight_decay, as AdamW) when `group["decoupled_weight_decay"]`, else L2 (added to the gradient)."""
    wd, decoupled = group["weight_decay"], group["decoupled_weight_decay"]
    p32, g = l2_gradient(param, param.grad, 0.0 if decoupled else wd, group["maximize"])
    if decoupled and wd != 0:
        p32 = p32 * tensor(1.0 - group["lr"] * wd, device=param.device)   # data: lr may change per step
    return p32, g


def check_flags(foreach=None, fused=None, capturable=False):
    """PyTorch's implementation switches, accepted: ggrad schedules every update of a step into the step's
    one graph, which is what foreach and fused buy, and has no CUDA graphs to capture. Each must be a bool
    (or None where PyTorch allows it)."""
    for name, value in (("foreach", foreach), ("fused", fused), ("capturable", capturable)):
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool or None, got {value!r}")


def l2_gradient(param, grad, weight_decay, maximize):
    """(param, gradient) in float32, the gradient negated when maximizing and with the L2 decay added:
    the start of the composed updates (PyTorch's order: maximize first, then weight_decay * param)."""
    p32 = param.detach().to(ggml.f32)
    g = grad.to(ggml.f32)
    if maximize:
        g = -g
    if weight_decay != 0:
        g = g + p32 * weight_decay
    return p32, g


class Optimizer:
    """Base class of all optimizers.

    Args:
        params: an iterable of Tensors, or of dicts (parameter groups) with a "params" entry and any
            per-group hyper-parameters overriding `defaults`.
        defaults (dict): the hyper-parameters a group gets when it does not set them.

    Attributes:
        defaults: the default hyper-parameters.
        param_groups: list of dicts, each with "params" (a list of Tensors) and its hyper-parameters.
        state: per-parameter state (a dict per parameter, keyed by the parameter).
    """

    skips_in_graph = False
    """True for optimizers that schedule every update through ggrad.optim.fused_updates (assign_, sgd_,
    adamw_) and keep their host state in `state` alone: a GradScaler then skips an overflowed step inside
    the step's graph (one compute), and restores `state` after a skipped one."""

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {type(params).__name__}")
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(k for k in group if k != "params"):
                lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    # ---- parameter groups ----------------------------------------------------------------------
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters (a dict with "params" and optional hyper-parameters) to optimize."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        if "params" not in param_group:
            raise ValueError("param_group must have a 'params' entry")
        group = dict(param_group)
        params = group["params"]
        if isinstance(params, Tensor):
            group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        else:
            group["params"] = list(params)
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
            if not p.dtype.is_float:
                raise TypeError(f"optimizer can only optimize floating point Tensors, got {p.dtype.name}")
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter "
                                 f"{name}")
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        ids = [id(p) for p in group["params"]]
        if len(set(ids)) != len(ids):
            raise ValueError("optimizer contains a parameter group with duplicate parameters")
        if seen & set(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self._check_group(group)
        self.param_groups.append(group)

    def _check_group(self, group):
        """Validate one group's hyper-parameters (subclasses raise ValueError naming the bad value)."""

    def _stepped(self, group, new_state):
        """The group's parameters that have a gradient, each state made by `new_state(p)` on first use and
        its "step" counted (1 on the first)."""
        params = [p for p in group["params"] if p.grad is not None]
        for p in params:
            state = self.state[p]
            if not state:
                state.update(new_state(p), step=0)
            state["step"] += 1
        return params

    # ---- gradients -----------------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every optimized parameter (to None, or to zeros)."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    with grad_mode.no_grad():
                        p.grad = zeros_like(p.grad)

    # ---- the update ----------------------------------------------------------------------------
    def step(self, closure: Callable[[], Tensor | float] | None = None) -> Tensor | float | None:
        """Schedule one update of every parameter that has a gradient, then compute everything pending.

        Forward, backward and the updates are computed as one graph per device. `closure`, when given,
        re-evaluates the model and returns the loss (it runs with gradients enabled).
        """
        loss = None
        if closure is not None:
            with grad_mode.enable_grad():
                loss = closure()
        for device in self._schedule_step():
            realize(device)
        return loss

    def _schedule_step(self) -> list[ggml.Device]:
        """Schedule the update of every parameter that has a gradient, computing nothing (tinygrad's
        schedule_step); return the devices the updates are pending on. `step` computes them; a caller
        that adds more to the same graph (the in-graph all-reduce step) computes them itself."""
        devices = {}
        saved_state = {p: dict(s) for p, s in self.state.items()}
        notes = replay_notes.active()
        if notes is not None:   # compile_step is recording: note what a replay of this step must do
            mark = len(notes.actions)
            stepped = [[p for p in group["params"] if p.grad is not None] for group in self.param_groups]
        try:
            with grad_mode.no_grad(), fused_updates.all_or_nothing():
                for group in self.param_groups:
                    for p in self._update_group(group):
                        devices.setdefault(p.device.name, p.device)
        except BaseException:
            # Ctrl-C or an error half-way: no update is left pending and the counters are as they were
            self.state.clear()
            self.state.update(saved_state)
            raise
        if notes is not None:
            _note_replayed_step(self, notes, mark, stepped)
        return list(devices.values())

    # ---- a replayed step (ggrad.compile_step) -------------------------------------------------------
    def _replay_hyperparameters(self, stepped) -> list | None:
        """The values of the Hyperparameters (fused_updates) a step of the parameters `stepped` (per group)
        makes, in the order it makes them, with the state as it is after the step's counters advanced;
        None where the step's update is not replayed (an optimizer whose values are not all graph inputs)."""
        return None

    def _replay_advance(self, stepped) -> None:
        """Advance the host state of the parameters `stepped` (per group) as a step does (step counts)."""

    def _replay_key(self):
        """What a recorded step's graph depends on here beside its hyper-parameters' values: each group's
        options but the learning rate, its parameters, their memory and requires_grad, and the state's
        dicts (a loaded state dict replaces them)."""
        key = [id(self.state), len(self.state)]
        for group in self.param_groups:
            params = group["params"]
            key.append(tuple((k, v) for k, v in group.items() if k not in _REPLAY_INPUTS))
            key.append(tuple(map(id, params)))
            key.append(tuple([id(p._node) for p in params]))
            key.append(tuple([p.requires_grad for p in params]))
        return tuple(key)

    def _update_group(self, group):
        """Schedule the updates of one group; return the parameters updated (each optimizer defines it)."""
        raise NotImplementedError(f"{type(self).__name__} must define _update_group(group)")

    # ---- state dicts ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state in PyTorch's layout, with parameters replaced by their index.

        Returns `{"state": {index: {name: value}}, "param_groups": [{..., "params": [index, ...]}]}`.
        Tensors are copies (computed on the device with the next graph), so later steps do not
        change a saved state dict.
        """
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: deepcopy(v) for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {}
        for p, s in self.state.items():
            if id(p) in index:
                state[index[id(p)]] = {k: _copy_value(v) for k, v in s.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict made by `state_dict()` (of an optimizer over parameters of the same shapes)."""
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError("optimizer state dict must be a dict with 'state' and 'param_groups' entries")
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has a different number of parameter groups "
                             f"({len(saved_groups)} saved, {len(self.param_groups)} here)")
        for saved, group in zip(saved_groups, self.param_groups):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(f"loaded state dict contains a parameter group that doesn't match the size of "
                                 f"optimizer's group ({len(saved['params'])} saved, {len(group['params'])} here)")
        by_index = {}
        for saved, group in zip(saved_groups, self.param_groups):
            for i, p in zip(saved["params"], group["params"]):
                by_index[int(i)] = p
        saved_state = {int(k): v for k, v in state_dict["state"].items()}
        new_state = defaultdict(dict)
        for i, s in saved_state.items():
            p = by_index.get(i)
            if p is None:
                continue
            new_state[p] = {k: _load_value(v, p, k) for k, v in s.items()}
        new_groups = []
        for saved, group in zip(saved_groups, self.param_groups):
            g = {k: deepcopy(v) for k, v in saved.items() if k != "params"}
            g["params"] = group["params"]
            new_groups.append(g)
        self.state = new_state
        self.param_groups = new_groups


_REPLAY_INPUTS = ("params", "lr", "initial_lr")   # group entries a replayed step takes as values, not structure


class _ReplayedStep(replay_notes.Action):
    """An optimizer step noted while compile_step records: at each replay the step counts advance and the
    new hyper-parameters (learning rate, bias corrections) are written into the graph's nodes of them."""

    def __init__(self, optimizer, stepped, made):
        self.optimizer, self.stepped = optimizer, stepped
        self.targets = [h.uploads for h in made]
        self.nodes = [node for h in made for node in h.uploads]

    def key(self):
        return self.optimizer._replay_key()

    def before(self):
        opt = self.optimizer
        opt._replay_advance(self.stepped)
        for values, nodes in zip(opt._replay_hyperparameters(self.stepped), self.targets):
            raw = np.asarray(values, dtype=np.float32)
            for node in nodes:
                node.write(raw)


def _note_replayed_step(optimizer, notes, mark, stepped):
    """Replace the Hyperparameters noted since `mark` by the step that made them, when the optimizer says
    how to make them again and that agrees with what this step made (else the step is not replayed)."""
    made = [a.hparams for a in notes.actions[mark:] if isinstance(a, fused_updates.MadeHyperparameters)]
    notes.actions[mark:] = [a for a in notes.actions[mark:] if not isinstance(a, fused_updates.MadeHyperparameters)]
    values = optimizer._replay_hyperparameters(stepped)
    if values is None or len(values) != len(made) or not all(
            np.array_equal(np.asarray(v, dtype=np.float32), h.values) for v, h in zip(values, made)):
        replay_notes.unsupported(f"{type(optimizer).__name__}'s step is not replayed with these options "
                                 "(its values are not all inputs of the graph)")
        return
    replay_notes.note(_ReplayedStep(optimizer, stepped, made))


def _copy_value(v):
    if isinstance(v, Tensor):
        with grad_mode.no_grad():
            return v.detach().clone()
    return deepcopy(v)


def _load_value(v, param, key):
    """A state entry for `param`. Tensors (and numpy arrays) are copied through the host onto its device,
    keeping their dtype: the optimizer then owns leaf tensors that it may update in place."""
    if isinstance(v, (Tensor, np.ndarray)):
        if tuple(v.shape) != param.shape:
            raise ValueError(f"loaded state {key!r} of shape {tuple(v.shape)} for a parameter of shape {param.shape}")
        host = v.detach().numpy() if isinstance(v, Tensor) else v
        dtype = v.dtype if isinstance(v, Tensor) else None
        return tensor(host, dtype=dtype, device=param.device)
    return deepcopy(v)
