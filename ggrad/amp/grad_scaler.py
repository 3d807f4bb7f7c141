"""`GradScaler`: dynamic loss scaling for float16 training, as PyTorch's `torch.amp.GradScaler`.

    scaler = ggrad.amp.GradScaler()
    with ggrad.autocast("cuda"):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()     # gradients of loss * scale: small f16 gradients stay representable
    scaler.step(optimizer)            # unscales, and skips the update when a gradient is inf or nan
    scaler.update()                   # scale * backoff_factor after a skipped step, * growth_factor after
                                      # growth_interval steps in a row without one

The inf/nan check is one scalar per device, computed in the same graph as the backward (sum over every
gradient of g * 0, which is nan exactly when some element is inf or nan). For ggrad's optimizers whose
gradients are on one device, `step` schedules the update conditional on that check
(`ggrad.autograd.update_guards.skipped_if_nan`: a skipped step writes back the old values on the device), so
backward, check and update are ONE compute; it then reads the check (as PyTorch's one host sync a step)
and, for a skipped step, restores the optimizer's host state (step counts, state made on a first step).
Other optimizers, and gradients on several devices (the skip is one decision for all of them), take two
computes: the check is read first, and the update scheduled only for a good step. Either way a skipped
step leaves parameters and optimizer state as they were (bitwise; a fused AdamW update may turn a
parameter equal to -0.0 into +0.0). The scale itself is a host number (every decision about it follows
that one read), so `get_scale()` costs nothing; it enters the graphs as uploaded data, so a changed scale
still reuses the cached step graphs.
"""

import math

import numpy as np

from .. import ggml
from ..autograd import grad_mode, replay_notes, update_guards
from . import gradient_checks
from ..autograd.factory import full
from ..autograd.tensor import Tensor
from ..ggml import f32

READY, UNSCALED, STEPPED = "ready", "unscaled", "stepped"


class GradScaler:
    """Scale the loss, unscale the gradients, skip steps whose gradients overflowed, adapt the scale.

    Args:
        device (str, default "cuda"): as PyTorch's first argument (ggrad scales on any device).
        init_scale (float, default 2.0**16): the first scale.
        growth_factor (float, default 2.0): multiplies the scale after `growth_interval` good steps.
        backoff_factor (float, default 0.5): multiplies the scale after a step with inf/nan gradients.
        growth_interval (int, default 2000): good steps in a row before the scale grows.
        enabled (bool, default True): False makes every method a pass-through (`step` just steps).
    """

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if growth_factor <= 1.0:
            raise ValueError(f"GradScaler: growth_factor should be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor should be in (0, 1), got {backoff_factor}")
        if not isinstance(growth_interval, int) or growth_interval <= 0:
            raise ValueError(f"GradScaler: growth_interval should be a positive integer, got {growth_interval!r}")
        self.device = device
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._per_optimizer = {}   # id(optimizer) -> {"stage": ..., "found_inf": [scalar Tensor per device]}

    # ---- the loop ------------------------------------------------------------------------------------
    def scale(self, outputs):
        """`outputs` (a Tensor, or a list/tuple of them) multiplied by the current scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * _scale_data(self, outputs, False)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("GradScaler.scale: outputs must be a Tensor or an iterable of Tensors")

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale in place (before clipping them, say) and
        schedule the inf/nan check; at most once per optimizer between two `update()` calls."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] is UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        per_device = {}   # the parameters whose gradients have elements, per device
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.dtype is not f32:
                    raise ValueError("Attempting to unscale FP16 gradients.")
                if p.grad.numel():
                    per_device.setdefault(p.device.name, []).append(p)
        with grad_mode.no_grad():
            found = []
            for params in per_device.values():
                # all of a device's gradients times the inverse scale: one op (gradient_checks.Scaled); then nan exactly
                # when some element is inf or nan: one op (gradient_checks.NonFinite)
                grads = gradient_checks.scaled([p.grad for p in params], _scale_data(self, params[0].grad, True))
                for p, g in zip(params, grads):
                    p.grad = g
                found.append(gradient_checks.nonfinite(grads))
            state["found_inf"] = found
        state["stage"] = UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscale (unless `unscale_` was called) and step the optimizer, unless a gradient is inf or nan.

        Returns what `optimizer.step` returns, or None for a skipped step."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state(optimizer)
        if state["stage"] is STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is READY:
            self.unscale_(optimizer)
        checks = state["found_inf"]
        if not checks:
            raise RuntimeError("No inf checks were recorded for this optimizer.")
        state["stage"] = STEPPED
        if len(checks) == 1 and getattr(optimizer, "skips_in_graph", False):
            if replay_notes.active() is not None:
                replay_notes.note(_ReplayedSkip(self, optimizer, checks[0]))
            saved = {p: dict(s) for p, s in optimizer.state.items()}
            with update_guards.skipped_if_nan(checks[0]):
                result = optimizer.step(*args, **kwargs)
            state["found"] = math.isnan(checks[0].item())   # computed by the step's graph: no second compute
            if not state["found"]:
                return result
            optimizer.state.clear()   # the device kept the old values; the host state goes back too
            optimizer.state.update(saved)
            return None
        replay_notes.unsupported("GradScaler.step reads its check before the update (gradients on several "
                                 "devices, or an optimizer that does not skip in the graph)")
        state["found"] = any(math.isnan(check.item()) for check in checks)
        return None if state["found"] else optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """Adapt the scale to the steps since the last update (or set it to `new_scale`)."""
        if not self._enabled:
            return
        if replay_notes.active() is not None:
            if isinstance(new_scale, Tensor):
                replay_notes.unsupported("GradScaler.update(new_scale) with a Tensor reads it on the host")
            replay_notes.note(_ReplayedUpdate(self, new_scale))
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, Tensor) else new_scale)
        else:
            stepped = [s for s in self._per_optimizer.values() if "found" in s]
            if not stepped:
                raise RuntimeError("No inf checks were recorded prior to update.")
            if any(s["found"] for s in stepped):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": READY, "found_inf": []})

    # ---- reading and setting -------------------------------------------------------------------------
    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def state_dict(self):
        """PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker
        (empty when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


def _scale_data(scaler, like, inverse):
    """The scale (or its inverse) as data of the graph; noted for a step compile_step records, whose
    replays write the scale of their own time into it."""
    data = _as_data(1.0 / scaler._scale if inverse else scaler._scale, like)
    if replay_notes.active() is not None:
        replay_notes.note(_ReplayedScale(scaler, data._node, inverse))
    return data


class _ReplayedScale(replay_notes.Action):
    """The scale (or its inverse) written into a replayed step's graph before its compute."""

    def __init__(self, scaler, node, inverse):
        self.scaler, self.node, self.inverse = scaler, node, inverse
        self.nodes = (node,)

    def key(self):
        return (id(self.scaler), self.scaler._enabled)

    def before(self):
        scale = self.scaler._scale
        self.node.write(np.asarray(1.0 / scale if self.inverse else scale, dtype=np.float32).reshape(1))


class _ReplayedSkip(replay_notes.Action):
    """A GradScaler's step of `optimizer` replayed: the optimizer's host state saved before the step and
    restored when the step's check (node of the graph) says its gradients were not finite."""

    def __init__(self, scaler, optimizer, check):
        self.scaler, self.optimizer, self.node = scaler, optimizer, check._node
        self.saved = None

    def before(self):
        state = self.scaler._state(self.optimizer)
        if state["stage"] is STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        self.saved = {p: dict(s) for p, s in self.optimizer.state.items()}

    def after(self):
        found = math.isnan(float(ggml.get_data(self.node, (1,))[0]))
        state = self.scaler._state(self.optimizer)
        state["stage"], state["found"] = STEPPED, found
        if found:
            self.optimizer.state.clear()
            self.optimizer.state.update(self.saved)
        self.saved = None


class _ReplayedUpdate(replay_notes.Action):
    """A GradScaler's update() replayed after the step's compute."""

    def __init__(self, scaler, new_scale):
        self.scaler, self.new_scale = scaler, new_scale

    def after(self):
        self.scaler.update(self.new_scale)


def _as_data(value, like):
    """`value` as a 0-d float32 tensor on `like`'s device: uploaded data, not a constant of the graph, so a
    step after the scale changed reuses the cached graph (ggrad.set_graph_cache)."""
    return full((), value, dtype=f32, device=like.device)
