"""`ggrad.func`: PyTorch's function transforms: `jvp`, and `functional_call` (nn/utils/stateless.py).

`jvp(func, primals, tangents)` runs `func(*primals)` with each primal made a dual tensor
(autograd/forward_ad.py: tangents by the double-backward trick) and returns `(output, jvp_out)`,
`jvp_out` the Jacobian of `func` at `primals` times `tangents`, zeros for an output that does not
depend on the primals. The outputs come back detached (no history), as PyTorch's.
"""

from .autograd import forward_ad, grad_mode
from .autograd.factory import zeros_like
from .autograd.tensor import Tensor
from .nn.utils.stateless import functional_call  # noqa: F401  (torch.func.functional_call)


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """(func(*primals), J tangents), and the auxiliary output when `has_aux` (func returns (out, aux)).

    Args:
        func: a function of Tensors giving a Tensor or a tuple of Tensors.
        primals (tuple of Tensors): the point; tangents (tuple of Tensors): the direction, one per primal.
        strict: accepted and unused, as in PyTorch 2.13.
        has_aux: func returns (output, aux); aux is returned as it is, after the two results.
    """
    if not isinstance(primals, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals to be a tuple. E.g. it should be valid to "
                           "call f(*primals).")
    if not isinstance(tangents, tuple) or len(tangents) != len(primals):
        raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to have the same python "
                           f"structure. For example, if primals is a tuple of 3 tensors, tangents also must be. "
                           f"Got {len(primals)} primals and {_count(tangents)} tangents.")
    for p, t in zip(primals, tangents):
        if not isinstance(p, Tensor) or not isinstance(t, Tensor):
            raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to be Tensors, got "
                               f"{type(p).__name__} and {type(t).__name__}")
    with grad_mode.enable_grad(), forward_ad.dual_level():
        result = func(*[forward_ad.make_dual(p, t) for p, t in zip(primals, tangents)])
        aux = None
        if has_aux:
            if not (isinstance(result, tuple) and len(result) == 2):
                raise RuntimeError("jvp(f, primals, tangents): output of function f should be a tuple: (output, aux) "
                                   "if has_aux is True")
            result, aux = result
        is_tuple = isinstance(result, tuple)
        outputs = result if is_tuple else (result,)
        for o in outputs:
            if not isinstance(o, Tensor):
                raise RuntimeError(f"jvp(f, primals, tangents): Expected f(*primals) to return only tensors, got "
                                   f"unsupported type {type(o).__name__}")
        pairs = [forward_ad.unpack_dual(o) for o in outputs]
    primal_out = tuple(p.primal.detach() for p in pairs)
    tangent_out = tuple(zeros_like(p.primal) if p.tangent is None else p.tangent for p in pairs)
    if not is_tuple:
        primal_out, tangent_out = primal_out[0], tangent_out[0]
    return (primal_out, tangent_out, aux) if has_aux else (primal_out, tangent_out)


def _count(tangents):
    return len(tangents) if isinstance(tangents, tuple) else f"a {type(tangents).__name__} of"
