"""PyTorch's smaller numeric functions, composed of ggrad's ops (their gradients are the ops'): clone, hypot,
logaddexp2, rad2deg, deg2rad, signbit, heaviside, aminmax, trace, cov, corrcoef, addmv, addr, chain_matmul."""

import collections
import math

from ..tensor import Tensor
from . import products, reduce
from .selection import where
from .torch_composites import logaddexp, outer
from ..declaration import declare
from ..arguments import TENSOR, kinds

__all__ = ["clone", "hypot", "logaddexp2", "rad2deg", "deg2rad", "signbit", "heaviside", "aminmax", "trace", "cov",
           "corrcoef", "addmv", "addr", "chain_matmul"]

_LN2 = math.log(2.0)
aminmax_result = collections.namedtuple("aminmax", ["min", "max"])


def _float(x):
    return x if x.dtype.is_float else x.float()


@declare()
def clone(input, *, memory_format=None):  # noqa: A002 (PyTorch's names)
    """A copy of `input` with its own memory, differentiable (torch.clone)."""
    return input.clone()


def _floats(name, input, other):  # noqa: A002
    """PyTorch's dtype rule of hypot and logaddexp2: floating tensors only."""
    if not isinstance(other, Tensor):
        raise TypeError(f"{name}(): argument 'other' (position 2) must be Tensor, not {type(other).__name__}")
    for t in (input, other):
        if not t.dtype.is_float:
            raise NotImplementedError(f'"{name}_cpu" not implemented for {t.dtype.torch_name} tensors: PyTorch\'s '
                                      f"{name} takes floating point tensors")


@kinds(other=TENSOR)
@declare(method=True)
def hypot(input, other):  # noqa: A002
    """sqrt(input^2 + other^2), elementwise."""
    _floats("hypot", input, other)
    return (input * input + other * other).sqrt()


@kinds(other=TENSOR)
@declare(method=True)
def logaddexp2(input, other):  # noqa: A002
    """log2(2^input + 2^other), without overflow (through logaddexp)."""
    _floats("logaddexp2", input, other)
    return logaddexp(input * _LN2, other * _LN2) * (1.0 / _LN2)


@declare(method=True)
def rad2deg(input):  # noqa: A002
    return _float(input) * (180.0 / math.pi)


@declare(method=True)
def deg2rad(input):  # noqa: A002
    return _float(input) * (math.pi / 180.0)


@declare(method=True)
def signbit(input):  # noqa: A002
    """Whether each element's sign bit is set (True for -0.0 as for negative numbers)."""
    if not input.dtype.is_float:
        return input < 0
    return (input < 0) | ((input == 0) & (1.0 / input < 0))


@kinds(values=TENSOR)
@declare(method=True)
def heaviside(input, values):  # noqa: A002
    """0 where input < 0, `values` where input == 0, 1 where input > 0 (both of one dtype, as PyTorch's)."""
    if not isinstance(values, Tensor):
        raise TypeError(f"heaviside(): argument 'values' must be Tensor, not {type(values).__name__}")
    if input.dtype is not values.dtype:
        raise RuntimeError(f"heaviside is not yet implemented for tensors with different dtypes "
                           f"({input.dtype.torch_name} and {values.dtype.torch_name})")
    return where(input == 0, values, (input > 0).to(input.dtype))


@declare(method=True)
def aminmax(input, *, dim=None, keepdim=False):  # noqa: A002
    """(min, max) over `dim` (all elements when None), as a named pair."""
    return aminmax_result(reduce.amin(input, dim, keepdim), reduce.amax(input, dim, keepdim))


@declare(method=True)
def trace(input):  # noqa: A002
    """The sum of a matrix's main diagonal."""
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return input.diagonal().sum()


@declare(method=True)
def cov(input, *, correction=1, fweights=None, aweights=None):  # noqa: A002
    """The covariance of the variables in input's rows (observations in its columns; a 1-d input is one
    variable), with frequency weights `fweights` and observation weights `aweights`."""
    if input.ndim > 2:
        raise ValueError(f"cov(): expected input to have two or fewer dimensions but got an input with {input.ndim} "
                         "dimensions")
    x = _float(input).reshape(1, -1) if input.ndim < 2 else _float(input)
    n = x.shape[1]
    weights = None
    for w in (fweights, aweights):
        if w is not None:
            weights = _float(w) if weights is None else weights * _float(w)
    if weights is None:
        total = float(n)
        mean = x.mean(1, keepdim=True)
        norm = total - correction
    else:
        total = weights.sum()
        mean = (x * weights).sum(1, keepdim=True) / total
        norm = total - correction * ((weights * _float(aweights)).sum() / total if aweights is not None else 1.0)
    centred = x - mean
    scaled = centred * weights if weights is not None else centred
    result = products.matmul(scaled, centred.transpose(0, 1)) / (norm.clamp(min=0.0) if isinstance(norm, Tensor)
                                                                  else max(norm, 0.0))
    return result.reshape(()) if input.ndim < 2 else result


@declare(method=True)
def corrcoef(input):  # noqa: A002
    """Pearson's correlation coefficients of the variables in input's rows, clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    std = c.diagonal().sqrt()
    return (c / std.unsqueeze(1) / std.unsqueeze(0)).clamp(-1.0, 1.0)


@declare(method=True)
def addmv(input, mat, vec, *, beta=1, alpha=1):  # noqa: A002
    """beta * input + alpha * (mat @ vec)."""
    return input * beta + products.matmul(mat, vec) * alpha


@declare(method=True)
def addr(input, vec1, vec2, *, beta=1, alpha=1):  # noqa: A002
    """beta * input + alpha * outer(vec1, vec2)."""
    return input * beta + outer(vec1, vec2) * alpha


@kinds(matrices=TENSOR)
@declare()
def chain_matmul(*matrices, out=None):
    """The product of the matrices, left to right (PyTorch's deprecated name for linalg.multi_dot)."""
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        if not isinstance(m, Tensor):
            raise TypeError(f"chain_matmul(): argument 'matrices' must be tuple of Tensors, not {type(m).__name__}")
        if m.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m.ndim}, expected 2 instead.")
    result = matrices[0]
    for m in matrices[1:]:
        result = products.matmul(result, m)
    return result
