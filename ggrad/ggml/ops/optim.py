"""Optimizer steps computed inside the graph: AdamW and SGD. Both update the parameter in place."""

from .._lib import lib
from . import _check as C
from ._check import make, tensor

__all__ = ["opt_step_adamw", "opt_step_sgd"]


def _param(op, a):
    pa = tensor(op, "a", a)
    if not pa.flags & lib.GGML_TENSOR_FLAG_PARAM:
        raise C.ArgumentError(f"{op}: a must be marked as a parameter first (GTensor.set_param())")
    C.types(op, "a", pa, C.ONLY_F32)
    C.contiguous_rows(op, "a", pa)
    return pa


def _state(op, name, pa, x):
    p = tensor(op, name, x)
    C.same_shape(op, pa, p, "a", name)
    C.types(op, name, p, C.ONLY_F32)
    C.contiguous_rows(op, name, p)
    return p


def _hyper(op, name, x, n):
    p = tensor(op, name, x)
    C.types(op, name, p, C.ONLY_F32)
    C.contiguous(op, name, p)
    if C.nelements(p) != n:
        C.fail(op, f"{name} must hold {n} f32 values, got ne={C.ne(p)}")
    return p


def opt_step_adamw(ctx, a, grad, m, v, adamw_params):
    """One AdamW step on `a`, in place; `m` and `v` (the moments) are updated too. The result is a view of `a`.

    With alpha, beta1, beta2, eps, wd, beta1h, beta2h = adamw_params:
    m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;
    a = a (1 - alpha wd) - alpha (m beta1h) / (sqrt(v beta2h) + eps),
    where beta1h = 1 / (1 - beta1^t) and beta2h = 1 / (1 - beta2^t) at step t (bias corrections).

    Args:
        ctx: the Context the result is made in.
        a: the parameter (f32, marked with set_param()).
        grad: its gradient (f32, a's shape).
        m: first-moment state (f32, a's shape).
        v: second-moment state (f32, a's shape).
        adamw_params: f32[7]: alpha, beta1, beta2, eps, wd, beta1h, beta2h.
    """
    op = "opt_step_adamw"
    pa = _param(op, a)
    pg, pm, pv = _state(op, "grad", pa, grad), _state(op, "m", pa, m), _state(op, "v", pa, v)
    pp = _hyper(op, "adamw_params", adamw_params, 7)
    return make(ctx, op, lib.ggml_opt_step_adamw, pa, pg, pm, pv, pp)


def opt_step_sgd(ctx, a, grad, sgd_params):
    """One SGD step with weight decay on `a`, in place: a = a (1 - alpha wd) - alpha grad. A view of `a`.

    Args:
        ctx: the Context the result is made in.
        a: the parameter (f32, marked with set_param()).
        grad: its gradient (f32, a's shape).
        sgd_params: f32[2]: alpha (learning rate), wd (weight decay).
    """
    op = "opt_step_sgd"
    pa = _param(op, a)
    pg = _state(op, "grad", pa, grad)
    pp = _hyper(op, "sgd_params", sgd_params, 2)
    return make(ctx, op, lib.ggml_opt_step_sgd, pa, pg, pp)
