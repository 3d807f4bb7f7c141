"""L-BFGS (Nocedal): quasi-Newton steps from a short history of gradient differences, with an optional strong
Wolfe line search, as PyTorch's `torch.optim.LBFGS`.

Each iteration re-evaluates the model through the closure (forward and backward, one GGML graph) and reads the
gradients back: the direction, its history and the line search are scalar-heavy decisions on flat float32
vectors, so they run on the host in numpy, as the PyTorch algorithm runs them on its flat views.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable

import numpy as np

from ..autograd import Tensor, grad_mode
from ..autograd.factory import tensor
from .optimizer import ParamsT, Optimizer

_HOST_STATE = ("d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad", "prev_loss")


class LBFGS(Optimizer):
    """L-BFGS over all parameters as one flat vector (one parameter group only, as PyTorch's).

    Args:
        params: iterable of Tensors.
        lr (float): the step length (the line search's first trial). Default: 1.
        max_iter (int): iterations per `step()`. Default: 20.
        max_eval (int or None): closure evaluations per `step()`; None: max_iter * 5 // 4. Default: None.
        tolerance_grad (float): stop when the largest gradient entry is this small. Default: 1e-7.
        tolerance_change (float): stop when the step or the loss changes less. Default: 1e-9.
        history_size (int): pairs of differences kept. Default: 100.
        line_search_fn (str or None): "strong_wolfe" or None (a fixed step). Default: None.

    `step(closure)` needs the closure: it zeroes the gradients, computes the loss, calls backward and
    returns the loss.
    """

    def __init__(self, params: ParamsT, lr: float = 1.0, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {line_search_fn!r}")
        max_eval = max_iter * 5 // 4 if max_eval is None else max_eval
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # ---- the flat vector ----------------------------------------------------------------------
    def _flat_grad(self) -> np.ndarray:
        return np.concatenate([np.zeros(p.numel(), np.float32) if p.grad is None
                               else p.grad.detach().numpy().astype(np.float32).ravel() for p in self._params])

    def _flat_params(self) -> np.ndarray:
        return np.concatenate([p.detach().numpy().astype(np.float32).ravel() for p in self._params])

    def _set_params(self, flat: np.ndarray) -> None:
        offset = 0
        with grad_mode.no_grad():
            for p in self._params:
                n = p.numel()
                p.copy_(tensor(flat[offset:offset + n].reshape(p.shape), dtype=p.dtype, device=p.device))
                offset += n

    def _evaluate(self, closure, x, t, d):
        """(loss, flat gradient) at x + t d; the parameters are left at x."""
        self._set_params(x + np.float32(t) * d)
        with grad_mode.enable_grad():
            loss = float(closure())
        flat_grad = self._flat_grad()
        self._set_params(x)
        return loss, flat_grad

    # ---- the step -----------------------------------------------------------------------------
    def step(self, closure: Callable[[], Tensor | float] | None = None) -> Tensor | float:  # type: ignore[override]
        """Up to `max_iter` L-BFGS iterations; returns the loss the closure gave first."""
        if closure is None:
            raise RuntimeError("LBFGS.step() needs a closure that recomputes the loss (and calls backward)")
        group = self.param_groups[0]
        lr, tol_grad, tol_change = group["lr"], group["tolerance_grad"], group["tolerance_change"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        with grad_mode.enable_grad():
            orig_loss = closure()
        loss, evals = float(orig_loss), 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if np.abs(flat_grad).max() <= tol_grad:
            return orig_loss
        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs", []), state.get("old_stps", []), state.get("ro", [])
        h_diag, prev_flat_grad = state.get("H_diag", 1.0), state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")
        n_iter = 0
        while n_iter < group["max_iter"]:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d, old_dirs, old_stps, ro, h_diag = -flat_grad, [], [], [], 1.0
            else:
                d, h_diag = self._direction(flat_grad, prev_flat_grad, d, t, old_dirs, old_stps, ro, h_diag,
                                            group["history_size"])
            prev_flat_grad, prev_loss = flat_grad.copy(), loss
            t = min(1.0, 1.0 / float(np.abs(flat_grad).sum())) * lr if state["n_iter"] == 1 else lr
            gtd = float(flat_grad @ d)
            if gtd > -tol_change:
                break
            x = self._flat_params()
            if group["line_search_fn"] == "strong_wolfe":
                loss, flat_grad, t, ls_evals = _strong_wolfe(
                    lambda step: self._evaluate(closure, x, step, d), t, d, loss, flat_grad, gtd)
                self._set_params(x + np.float32(t) * d)
            else:
                self._set_params(x + np.float32(t) * d)
                ls_evals = 0
                if n_iter != group["max_iter"]:
                    with grad_mode.enable_grad():
                        loss = float(closure())
                    flat_grad, ls_evals = self._flat_grad(), 1
            evals += ls_evals
            state["func_evals"] += ls_evals
            if n_iter == group["max_iter"] or evals >= group["max_eval"]:
                break
            if np.abs(flat_grad).max() <= tol_grad or np.abs(d * np.float32(t)).max() <= tol_change \
                    or abs(loss - prev_loss) < tol_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    @staticmethod
    def _direction(flat_grad, prev_flat_grad, d, t, old_dirs, old_stps, ro, h_diag, history_size):
        """The next direction by the two-loop recursion, the history updated with the last step."""
        y = flat_grad - prev_flat_grad
        s = d * np.float32(t)
        ys = float(y @ s)
        if ys > 1e-10:
            if len(old_dirs) == history_size:
                old_dirs.pop(0), old_stps.pop(0), ro.pop(0)
            old_dirs.append(y)
            old_stps.append(s)
            ro.append(1.0 / ys)
            h_diag = ys / float(y @ y)
        q = -flat_grad
        alphas = [0.0] * len(old_dirs)
        for i in reversed(range(len(old_dirs))):
            alphas[i] = float(old_stps[i] @ q) * ro[i]
            q = q - np.float32(alphas[i]) * old_dirs[i]
        r = q * np.float32(h_diag)
        for i in range(len(old_dirs)):
            beta = float(old_dirs[i] @ r) * ro[i]
            r = r + np.float32(alphas[i] - beta) * old_stps[i]
        return r, h_diag

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """As Optimizer's; the flat host vectors of the history are copied as they are."""
        host = {k: {name: copy.deepcopy(v) for name, v in s.items() if name in _HOST_STATE}
                for k, s in state_dict["state"].items()}
        plain = {"param_groups": state_dict["param_groups"],
                 "state": {k: {n: v for n, v in s.items() if n not in _HOST_STATE}
                           for k, s in state_dict["state"].items()}}
        super().load_state_dict(plain)
        for k, values in host.items():
            self.state[self._params[int(k)]].update(values)


def _cubic_minimum(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to `bounds` (default: the
    interval); the middle of the bounds where the cubic has no minimum."""
    low, high = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 * d1 - g1 * g2
    if d2_square < 0:
        return (low + high) / 2.0
    d2 = math.sqrt(d2_square)
    if x1 <= x2:
        point = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        point = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(point, low), high)


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step length t along d satisfying the strong Wolfe conditions (Nocedal & Wright, algorithms 3.5
    and 3.6): bracket, then zoom. `evaluate(t)` gives (loss, flat gradient) at t. Returns (loss, gradient,
    t, evaluations)."""
    d_norm = float(np.abs(d).max())
    f_new, g_new = evaluate(t)
    evals, gtd_new = 1, float(g_new @ d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done, ls_iter = False, 0
    while ls_iter < max_ls:
        if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev):
            bracket = [[t_prev, f_prev, g_prev, gtd_prev], [t, f_new, g_new, gtd_new]]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, done = [[t, f_new, g_new, gtd_new]], True
            break
        if gtd_new >= 0:
            bracket = [[t_prev, f_prev, g_prev, gtd_prev], [t, f_new, g_new, gtd_new]]
            break
        t_next = _cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = t_next
        f_new, g_new = evaluate(t)
        evals, gtd_new, ls_iter = evals + 1, float(g_new @ d), ls_iter + 1
    else:
        bracket = [[0.0, f, g, gtd], [t, f_new, g_new, gtd_new]]
    insufficient = False
    low, high = (0, 1) if len(bracket) == 1 or bracket[0][1] <= bracket[-1][1] else (1, 0)
    while not done and ls_iter < max_ls:
        (a, fa, _, ga), (b, fb, _, gb) = bracket
        if abs(b - a) * d_norm < tolerance_change:
            break
        t = _cubic_minimum(a, fa, ga, b, fb, gb)
        top, bottom = max(a, b), min(a, b)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:
            if insufficient or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(t)
        evals, gtd_new, ls_iter = evals + 1, float(g_new @ d), ls_iter + 1
        if f_new > f + c1 * t * gtd or f_new >= bracket[low][1]:
            bracket[high] = [t, f_new, g_new, gtd_new]
            low, high = (0, 1) if bracket[0][1] <= bracket[1][1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high][0] - bracket[low][0]) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = [t, f_new, g_new, gtd_new]
    t, f_new, g_new, _ = bracket[low]
    return f_new, g_new, t, evals
