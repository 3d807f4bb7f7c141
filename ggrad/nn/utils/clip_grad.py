"""Gradient clipping: `clip_grad_norm_` and `clip_grad_value_`, computed on the device.

Both only add nodes to the pending graph: the norm is a 0-d Tensor that is computed together with
the backward pass and the optimizer step, and read only when you read it.
"""

import math

from ... import ggml
from ...autograd import Tensor, grad_mode
from ...autograd.factory import tensor
from ...autograd.ops import clamp, maximum


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _total_norm(grads, norm_type):
    """The norm of the concatenated gradients, one partial result per device, combined on the first."""
    partial = {}
    for g in grads:
        g32 = g if g.dtype is ggml.f32 else g.to(ggml.f32)
        if norm_type == math.inf:
            part = g32.abs().amax()
        elif norm_type == 2.0:
            part = (g32 * g32).sum()
        elif norm_type == 1.0:
            part = g32.abs().sum()
        else:
            part = (g32.abs() ** norm_type).sum()
        key = g.device.name
        if key not in partial:
            partial[key] = part
        elif norm_type == math.inf:
            partial[key] = maximum(partial[key], part)
        else:
            partial[key] = partial[key] + part
    device = grads[0].device
    total = None
    for part in partial.values():
        part = part.to(device)  # a host copy only when the gradients live on several devices
        if total is None:
            total = part
        elif norm_type == math.inf:
            total = maximum(total, part)
        else:
            total = total + part
    if norm_type == 2.0:
        return total.sqrt()
    if norm_type in (1.0, math.inf):
        return total
    return total ** (1.0 / norm_type)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale the gradients of `parameters` in place so that their joint norm is at most `max_norm`.

    The norm is that of all gradients concatenated into one vector; each gradient is multiplied by
    min(1, max_norm / (total_norm + 1e-6)).

    Args:
        parameters (Tensor or iterable of Tensors): parameters whose `.grad` to clip.
        max_norm (float): largest allowed norm.
        norm_type (float): p of the p-norm; `float("inf")` for the max norm. Default: 2.0.
        error_if_nonfinite (bool): raise if the norm is nan or inf. This reads the norm, so it
            computes the pending graph. Default: False.

    Returns:
        Tensor: the total norm of the gradients before clipping (0-d, pending until read).
    """
    norm_type = float(norm_type)
    if norm_type <= 0:
        raise ValueError(f"Invalid norm_type: {norm_type} (expected > 0 or inf)")
    max_norm = float(max_norm)
    grads = _grads(parameters)
    if not grads:
        return tensor(0.0)
    with grad_mode.no_grad():
        total = _total_norm(grads, norm_type)
        if error_if_nonfinite and not math.isfinite(total.item()):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is "
                               "non-finite, so it cannot be clipped. To disable this error and scale the gradients "
                               "by the non-finite norm anyway, set `error_if_nonfinite=False`")
        coef = clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef if g.device == total.device else coef.to(g.device))
    return total


def clip_grad_value_(parameters, clip_value):
    """Clamp the gradients of `parameters` in place to [-clip_value, clip_value].

    Args:
        parameters (Tensor or iterable of Tensors): parameters whose `.grad` to clip.
        clip_value (float): the bound (> 0).
    """
    clip_value = float(clip_value)
    if clip_value < 0:
        raise ValueError(f"Invalid clip_value: {clip_value} (expected >= 0)")
    with grad_mode.no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)
