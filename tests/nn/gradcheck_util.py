"""The oracle for nn tests: ggrad.autograd.gradcheck against a float64 numpy reference.

`check(fn, ref, inputs, params)` compares the forward values, then every gradient ggrad's backward
produces (for float inputs and for the given Parameters) against central finite differences of the
numpy reference in float64 on the host.
"""

import numpy as np

import ggrad
from ggrad.autograd import gradcheck


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


def check(fn, ref, inputs, params=(), atol=1e-4, rtol=1e-4, grad_atol=1e-3, grad_rtol=1e-3, seed=0):
    """Check `fn` (ggrad) against `ref` (numpy) in value and gradient; returns ggrad's output values.

    Args:
        fn: fn(*tensors) -> Tensor, with one ggrad tensor per entry of `inputs`.
        ref: ref(*arrays) -> ndarray, given float64 copies of `inputs` followed by the values of `params`.
        inputs: numpy arrays (float ones get gradients checked; integer ones are indices/targets).
        params: Parameters that `fn` uses (e.g. a module's); their `.grad` is checked too.
    """
    tensors = as_tensors(inputs)
    outputs = []

    def recorded(*args):
        out = fn(*args)
        outputs.append(out)
        return out

    assert gradcheck(recorded, tensors, reference=ref, params=params, atol=grad_atol, rtol=grad_rtol,
                     forward_atol=atol, forward_rtol=rtol, seed=seed)
    return outputs[0].numpy()
