"""Selection by a bool mask: `where` and `masked_fill`, each element picked (not blended) so that an inf or nan
in the branch not taken stays out of the result and out of its gradient."""

from ...ggml import f32, i32
from ...ggml.errors import ShapeError
from ..dtype_rules import promote, result_type
from ..factory import arange, tensor
from ..tensor import Tensor
from ..torch_dtypes import BOOL
from .broadcast import broadcast_shapes, expand_to
from .convert import relabel
from .indexing import GetRows
from .joins import cat
from .views import reshape
from ..declaration import declare
from ..arguments import OPERAND, kinds

_ONE_ARGUMENT = object()   # where(condition) with no input and other


def _as_mask(mask, op):
    """A bool mask Tensor as its float32 0/1 storage; PyTorch's errors for anything else."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"{op}(): the mask must be a bool Tensor, got {type(mask).__name__}")
    if mask.dtype is not BOOL:
        raise RuntimeError(f"{op}: expected a boolean mask, but got a mask with dtype {mask.dtype!r}; "
                           "compare first (mask == 0) or use .bool()")
    return relabel(mask.detach(), f32)


@declare(method=True)
def masked_fill(x, mask, value):
    """x with `value` wherever the bool `mask` (broadcastable into x) is True; exact for any value,
    infinities and nan included, as PyTorch."""
    m = _as_mask(mask, "masked_fill")
    broadcast_shapes(m.shape, x.shape, "masked_fill")
    if broadcast_shapes(m.shape, x.shape) != x.shape:
        raise ShapeError(f"masked_fill: mask of shape {m.shape} does not broadcast to the input's {x.shape}")
    fill = value.to(x.dtype) if isinstance(value, Tensor) else tensor(value, dtype=x.dtype, device=x.device)
    return where(mask, fill, x)


_EXACT_SELECT = 1 << 23   # positions up to 2 * this are exact in the float32 index arithmetic below


@kinds(a=OPERAND)
@declare()
def where(condition, a=_ONE_ARGUMENT, b=_ONE_ARGUMENT):
    """a where condition is nonzero, else b (broadcast). Each element is picked, not blended, so an inf or
    nan in the branch not taken stays out of the result (and out of its gradient). `where(condition)`
    alone is `nonzero(condition, as_tuple=True)`, as PyTorch."""
    if a is _ONE_ARGUMENT and b is _ONE_ARGUMENT:
        return condition.nonzero(as_tuple=True)   # logical's, through the Tensor method (logical builds on this)
    if a is _ONE_ARGUMENT or b is _ONE_ARGUMENT:
        raise TypeError("where() takes the condition alone or with both input and other")
    m = _as_mask(condition, "where")
    if not isinstance(a, Tensor) and not isinstance(b, Tensor) and isinstance(condition, Tensor):
        a = tensor(a, dtype=result_type(a, b), device=condition.device)   # where(c, 1, 0) is int64
    ref = a if isinstance(a, Tensor) else b
    a, b = promote(a, b, "where")
    shape = broadcast_shapes(broadcast_shapes(a.shape, b.shape, "where"), m.shape, "where")
    n = 1
    for s in shape:
        n *= s
    if n == 0 or n > _EXACT_SELECT:
        return b + m * (a - b)   # beyond float32's exact integers, a blend (inf/nan leak as documented)
    flat = [reshape(expand_to(reshape(t, (1,) * (len(shape) - t.ndim) + t.shape), shape), n, 1)
            for t in (b, a)]
    stacked = cat(flat, 0)                                              # rows: b's, then a's
    pick = reshape(expand_to(reshape(m, (1,) * (len(shape) - m.ndim) + m.shape), shape), n)
    rows = (pick * float(n) + arange(n, dtype=f32, device=ref.device)).to(i32)
    out = GetRows.apply(stacked, rows)
    out = reshape(out, shape)
    return out if out.dtype is a.dtype else out.to(a.dtype)
