"""The oracle for nn tests: a ggrad computation against a float64 numpy reference.

`check(fn, ref, inputs, params)` compares the forward values, then every gradient ggrad's backward
produces (for float inputs and for the given Parameters) against central finite differences of the
numpy reference in float64 on the host. Failures say which side produced what.
"""

import numpy as np

import ggrad


def as_tensors(arrays):
    """ggrad tensors of `arrays`: float arrays become float32 leaves that require grad, ints int32."""
    out = []
    for a in arrays:
        a = np.asarray(a)
        if a.dtype.kind == "f":
            out.append(ggrad.tensor(a.astype(np.float32), requires_grad=True))
        else:
            out.append(ggrad.tensor(a.astype(np.int32)))
    return out


def numeric_grads(scalar_fn, arrays, eps=1e-6):
    """Central differences of `scalar_fn(*arrays)` (float64) with respect to every float array."""
    arrays = [np.array(a, dtype=np.float64) if np.asarray(a).dtype.kind == "f" else np.asarray(a) for a in arrays]
    grads = []
    for a in arrays:
        if a.dtype.kind != "f":
            grads.append(None)
            continue
        g = np.zeros_like(a)
        flat, gflat = a.reshape(-1), g.reshape(-1)
        for i in range(flat.size):
            old = flat[i]
            flat[i] = old + eps
            up = scalar_fn(*arrays)
            flat[i] = old - eps
            down = scalar_fn(*arrays)
            flat[i] = old
            gflat[i] = (up - down) / (2 * eps)
        grads.append(g)
    return grads


def check(fn, ref, inputs, params=(), atol=1e-4, rtol=1e-4, grad_atol=1e-3, grad_rtol=1e-3, seed=0,
          check_forward=True):
    """Check `fn` (ggrad) against `ref` (numpy) in value and gradient.

    Args:
        fn: fn(*tensors) -> Tensor, with one ggrad tensor per entry of `inputs`.
        ref: ref(*arrays) -> ndarray, given float64 copies of `inputs` followed by the values of `params`.
        inputs: numpy arrays (float ones get gradients checked; integer ones are indices/targets).
        params: Parameters that `fn` uses (e.g. a module's); their `.grad` is checked too.

    Returns:
        the ggrad output as a numpy array.
    """
    tensors = as_tensors(inputs)
    for p in params:
        p.grad = None
    out = fn(*tensors)
    weights = np.random.default_rng(seed).standard_normal(out.shape)
    # Backward before any read: forward, backward and the reads below are one graph.
    (out * ggrad.tensor(weights.astype(np.float32))).sum().backward()
    values = out.numpy()
    host = [np.asarray(a, dtype=np.float64) if np.asarray(a).dtype.kind == "f" else np.asarray(a)
            for a in inputs]
    host += [p.numpy().astype(np.float64) for p in params]
    expected = np.asarray(ref(*host))
    if expected.shape != values.shape:
        raise AssertionError(f"shape: ggrad gave {values.shape}, the numpy reference {expected.shape}")
    if check_forward:
        np.testing.assert_allclose(values, expected, rtol=rtol, atol=atol, err_msg="forward: ggrad (actual) vs numpy")
    numeric = numeric_grads(lambda *a: float(np.sum(np.asarray(ref(*a)) * weights)), host)
    leaves = list(tensors) + list(params)
    names = [f"input {i}" for i in range(len(tensors))] + [f"param {i} {tuple(p.shape)}" for i, p in
                                                            enumerate(params)]
    for leaf, num, name in zip(leaves, numeric, names):
        if num is None:
            continue
        if leaf.grad is None:
            raise AssertionError(f"{name}: ggrad gave no gradient; finite differences say {num}")
        np.testing.assert_allclose(leaf.grad.numpy(), num, rtol=grad_rtol, atol=grad_atol,
                                   err_msg=f"gradient of {name}: ggrad backward (actual) vs finite differences")
    return values
