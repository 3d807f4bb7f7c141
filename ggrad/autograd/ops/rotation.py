"""PyTorch's rot90: a quarter turn of the plane of two dims, from flip and transpose."""

from ..arguments import as_int
from ..tensor import _axis
from .shape_ops import flip
from ..declaration import declare


@declare(method=True)
def rot90(input, k=1, dims=(0, 1)):  # noqa: A002 (PyTorch's names)
    """Rotate by 90 degrees k times, from the first of `dims` towards the second."""
    k = as_int(k, "k", "rot90")
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    a, b = _axis(dims[0], input.ndim), _axis(dims[1], input.ndim)
    if a == b:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {a} and dim1 = {b}")
    k %= 4
    if k == 1:
        return flip(input, [b]).transpose(a, b)
    if k == 2:
        return flip(input, [a, b])
    if k == 3:
        return flip(input, [a]).transpose(a, b)
    return input * 1 if input.dtype.is_float else input.clone()
