"""The host side of torch.linalg's decompositions and solvers, which GGML has none of: the checks PyTorch
makes on a matrix argument, the read of a tensor to the host as float64 (what is pending is computed first:
one synchronisation), the float32 result put back on the tensor's device, and PyTorch's LinAlgError with its
index of the first zero pivot of an LU factorization (LAPACK's getrf `info`), found the way getrf finds it.
"""

import numpy as np

from ..factory import tensor
from ..tensor import Tensor

# PyTorch's ScalarType names, as its linalg messages give them
_SCALAR_NAMES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
                 "float16": "Half", "bfloat16": "BFloat16", "float32": "Float"}


class LinAlgError(RuntimeError):
    """A matrix the factorization or solver cannot handle (PyTorch's torch.linalg.LinAlgError)."""


def scalar_name(dtype):
    """PyTorch's ScalarType name of a dtype ("Float", "Long"), as its linalg messages give it."""
    return _SCALAR_NAMES.get(dtype.torch_name, dtype.torch_name)


def check_matrix(A, op, square=False, name="A", low_precision=False):
    """Raise PyTorch's error unless A is a float32 Tensor (float16 and bfloat16 too where `low_precision`) of
    (batches of) matrices, square ones if `square`."""
    if not isinstance(A, Tensor):
        raise TypeError(f"{op}(): argument '{name}' (position 1) must be Tensor, not {type(A).__name__}")
    if A.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    dtype = scalar_name(A.dtype)
    if not A.dtype.is_float:
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got {dtype}")
    if A.dtype.torch_name != "float32" and not low_precision:
        raise RuntimeError(f"{op}: Low precision dtypes not supported. Got {dtype}")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: {name} must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")


def host(t):
    """The values of `t` as a float64 array: computes what is pending and reads it (one synchronisation)."""
    return t.detach().numpy().astype(np.float64)


def constant(values, like, dtype=np.float32):
    """A float64 array as a tensor of PyTorch's result dtype (float32) on `like`'s device, outside the graph."""
    return tensor(np.array(values, dtype=dtype), device=like.device)


def first_zero_pivot(matrix):
    """The 1-based index of the first exactly zero pivot of the LU factorization of a square matrix with
    partial pivoting (LAPACK getrf's `info`), or 0 where there is none."""
    U = np.array(matrix, dtype=np.float64)
    n = U.shape[0]
    first = 0
    for j in range(n):
        p = j + int(np.argmax(np.abs(U[j:, j])))
        if U[p, j] == 0:
            first = first or j + 1
            continue
        U[[j, p]] = U[[p, j]]
        U[j + 1:, j:] -= np.outer(U[j + 1:, j] / U[j, j], U[j, j:])
    return first


def singular_elements(matrices):
    """(flat batch index, first zero pivot) of each exactly singular matrix of a (..., n, n) array, in order."""
    flat = matrices.reshape((int(np.prod(matrices.shape[:-2])),) + matrices.shape[-2:])
    found = ((b, first_zero_pivot(m)) for b, m in enumerate(flat))
    return [(b, info) for b, info in found if info]


def batch_prefix(matrices, index):
    """PyTorch's '(Batch element i): ' for a batched input, nothing for one matrix."""
    return f"(Batch element {index}): " if matrices.ndim > 2 else ""


def rank_cutoff(s, atol, rtol, m, n):
    """max(atol, rtol * s_max) per matrix of singular values `s` (..., k), with PyTorch's default rtol:
    eps(float32) * max(m, n), or 0 where atol is given and positive. atol and rtol: numbers or Tensors."""
    def value(v):
        return host(v) if isinstance(v, Tensor) else (0.0 if v is None else float(v))
    if rtol is None:
        positive_atol = atol is not None and np.all(value(atol) > 0)
        rtol = 0.0 if positive_atol else np.finfo(np.float32).eps * max(m, n)
    return np.maximum(value(atol), value(rtol) * s.max(axis=-1, initial=0.0))
