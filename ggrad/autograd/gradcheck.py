"""`gradcheck`: backward's gradients against finite differences, as `torch.autograd.gradcheck`.

GGML computes in float32, where central differences of the function itself are only good to about
1e-3. Given `reference=`, a float64 numpy version of the same function, the differences are taken of
the reference instead (and its values checked against the forward): that is how ggrad's own tests
check every op.
"""

import numpy as np

from .factory import tensor
from .grad_mode import no_grad
from .tensor import Tensor


class GradcheckError(RuntimeError):
    """The analytic and the numerical gradient (or the forward and the reference) disagree."""


def gradcheck(func, inputs, *, eps=None, atol=None, rtol=None, raise_exception=True, reference=None,
              params=(), forward_atol=1e-4, forward_rtol=1e-4, seed=0):
    """Check the gradients that backward gives `func` at `inputs` against finite differences.

    Args:
        func: func(*inputs) -> Tensor or tuple of Tensors.
        inputs: a Tensor or a sequence of them (and other values, passed through); float Tensors that
            require grad are checked.
        eps: the finite-difference step (default 1e-3 on func, 1e-6 on a reference).
        atol, rtol: tolerances of the gradient comparison (default 1e-2/1e-2 on func, 2e-3/2e-2 on a
            reference).
        raise_exception: raise GradcheckError on a mismatch (else return False).
        reference: optional reference(*arrays) -> ndarray, given float64 copies of the inputs' values
            followed by those of `params`; its values are compared with the forward too.
        params: more Tensors that func uses (a module's Parameters); their gradients are checked too.
        forward_atol, forward_rtol: tolerances of the forward comparison with `reference`.
        seed: seed of the random weights that reduce the outputs to one number.

    Returns:
        True when every gradient agrees.
    """
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    if eps is None:
        eps = 1e-6 if reference is not None else 1e-3
    atol = atol if atol is not None else (2e-3 if reference is not None else 1e-2)
    rtol = rtol if rtol is not None else (2e-2 if reference is not None else 1e-2)
    leaves = [t for t in inputs if _checked(t)] + [p for p in params if _checked(p)]
    if not leaves:
        raise ValueError("gradcheck: no input or parameter is a float Tensor that requires grad")
    for leaf in leaves:
        leaf.grad = None

    outputs = _as_tuple(func(*inputs))
    rng = np.random.default_rng(seed)
    weights = [rng.standard_normal(o.shape) for o in outputs]
    total = None
    for o, w in zip(outputs, weights):
        term = (o * tensor(w.astype(np.float32), device=o.device)).sum()
        total = term if total is None else total + term
    total.backward()   # before any read: forward, backward and the reads below are one graph
    values = [o.numpy() for o in outputs]

    try:
        if reference is not None:
            host = [_host(a) for a in inputs] + [_host(p) for p in params]
            _compare_forward(values, _as_tuple(reference(*host)), forward_atol, forward_rtol)
            numeric = _numeric_reference(reference, host, inputs, params, weights, eps)
        else:
            numeric = _numeric_func(func, inputs, leaves, weights, eps)
        for i, (leaf, num) in enumerate(zip(leaves, numeric)):
            position = [j for j, t in enumerate(inputs) if t is leaf]   # by identity: == is elementwise
            name = f"input {position[0]}" if position else f"param {i} {leaf.shape}"
            if leaf.grad is None:
                raise GradcheckError(f"gradcheck: {name} got no gradient; finite differences say {num}")
            got = leaf.grad.numpy().astype(np.float64)
            if not np.allclose(got, num, atol=atol, rtol=rtol):
                worst = np.unravel_index(np.argmax(np.abs(got - num)), got.shape) if got.ndim else ()
                raise GradcheckError(f"gradcheck: gradient of {name} (shape {leaf.shape}) differs: backward gave "
                                     f"{got[worst]:.6g}, finite differences {num[worst]:.6g} at index {worst} "
                                     f"(atol={atol}, rtol={rtol})")
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def _checked(t):
    return isinstance(t, Tensor) and t.requires_grad and t.dtype.is_float


def _as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _host(a):
    if isinstance(a, Tensor):
        a = a.detach().numpy()
    a = np.asarray(a)
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def _compare_forward(values, expected, atol, rtol):
    for i, (got, want) in enumerate(zip(values, expected)):
        want = np.asarray(want)
        if got.shape != want.shape:
            raise GradcheckError(f"gradcheck: output {i} has shape {got.shape}, the reference {want.shape}")
        if not np.allclose(got, want, atol=atol, rtol=rtol):
            raise GradcheckError(f"gradcheck: output {i} differs from the reference by up to "
                                 f"{np.max(np.abs(got - want)):.3g} (atol={atol}, rtol={rtol})")


def _numeric_reference(reference, host, inputs, params, weights, eps):
    """Central differences of the weighted reference, in float64, for every checked leaf."""
    def score(arrays):
        return sum(float(np.sum(np.asarray(o, dtype=np.float64) * w))
                   for o, w in zip(_as_tuple(reference(*arrays)), weights))

    grads = []
    for i, t in enumerate(list(inputs) + list(params)):
        if not _checked(t):
            continue
        a = host[i]
        g = np.zeros_like(a)
        flat, gflat = a.reshape(-1), g.reshape(-1)
        for j in range(flat.size):
            old = flat[j]
            flat[j] = old + eps
            up = score(host)
            flat[j] = old - eps
            down = score(host)
            flat[j] = old
            gflat[j] = (up - down) / (2 * eps)
        grads.append(g)
    return grads


def _numeric_func(func, inputs, leaves, weights, eps):
    """Central differences of the weighted func itself (float32): each leaf (input or parameter) holds the
    perturbed value for one evaluation, then its own value again."""
    def score():
        with no_grad():
            outputs = _as_tuple(func(*inputs))
        return sum(float(np.sum(o.numpy().astype(np.float64) * w)) for o, w in zip(outputs, weights))

    grads = []
    for leaf in leaves:
        original = leaf.detach()
        base = original.numpy().astype(np.float64)
        g = np.zeros_like(base)
        try:
            for j in range(base.size):
                scores = []
                for sign in (1.0, -1.0):
                    value = base.copy()
                    value.reshape(-1)[j] += sign * eps
                    leaf._rebind(tensor(value.astype(np.float32), dtype=leaf.dtype, device=leaf.device))
                    scores.append(score())
                g.reshape(-1)[j] = (scores[0] - scores[1]) / (2 * eps)
        finally:
            leaf._rebind(original)
        grads.append(g)
    return grads
