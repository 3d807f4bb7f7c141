"""Roundings: the float32 values that autocast's low precision results were rounded from.

An autocast product gives its result in float16/bfloat16, as PyTorch's, rounded from the float32 that
GGML's mul_mat accumulates. When an op then computes in float32 (a residual add, softmax, a norm, a
loss, an activation that GGML runs in float32), the value would go f32 -> f16 -> f32: two casts in the
forward and two more in the backward. `note(low, source)` (ggrad.amp) records such a rounding;
`widen(x, dtype)`, the conversion the dtype rules use before an op computes in float32, then takes the
float32 source itself instead of casting back (a deliberate difference from PyTorch: the value skips
one rounding, so it is closer to the float32 result; where the lowering's half kernel writes a linear's
rounded result itself, the float32 source is that value widened, as PyTorch's). An op that keeps its
input for its backward takes `rounded(x, dtype)` instead: x's own value, kept in x's precision as PyTorch
keeps it, with the gradient still going to the source uncast. A cast written by the user (`x.float()`,
`x.to(...)`) still rounds. A noted rounding or its source modified in place is not folded.

The source stays alive while its rounding does (a rounding held through a compute keeps both).
"""

import weakref

from ..ggml import f32
from . import autocast_hook
from .function import Function

_sources = {}   # id(low) -> (weakref(low), low's version, source, source's version)


def note(low, source):
    """Record that Tensor `low` is `source` rounded to a lower precision."""
    key = id(low)

    def forget(ref):
        entry = _sources.get(key)
        if entry is not None and entry[0] is ref:
            del _sources[key]
    _sources[key] = (weakref.ref(low, forget), low._version, source, source._version)


def source_of(x):
    """The Tensor `x` was rounded from (as noted and unmodified since), or None."""
    entry = _sources.get(id(x))
    if entry is None or entry[0]() is not x or entry[1] != x._version or entry[2]._version != entry[3]:
        return None
    return entry[2]


def widen(x, dtype):
    """`x` in `dtype` for an op that computes in it: the noted source when it has that dtype, else a cast."""
    source = source_of(x)
    if source is not None and source.dtype is dtype:
        return source
    return x.to(dtype)


def rounded(x, dtype):
    """`x` converted to `dtype` as its own (rounded) value, for an op that keeps it for its backward in x's
    precision (dtype_rules._kept_half): the gradient still goes straight to x's noted source, uncast (no
    float32 -> low -> float32 round trip of the gradient). Without a noted source, a plain cast."""
    source = source_of(x)
    if source is None or source.dtype is not dtype:
        return x.to(dtype)
    return _Rounded.apply(source, x)


class _Rounded(Function):
    """`low` in its `source`'s dtype; the gradient goes to `source` as it is."""
    _replayable = True

    @staticmethod
    def forward(ctx, source, low):
        return low.to(source.dtype)

    @staticmethod
    def backward(ctx, g):
        return g, None


def cast_back(out, dtype):
    """`out` (an op's float32 result) cast back to its input's `dtype`; noted inside an autocast region
    (the value a float16 activation rounds there), as-is elsewhere."""
    low = out.to(dtype)
    if autocast_hook.current() is not None and dtype.is_float:
        note(low, out)
    return low


def kept_half_unpack(t):
    """A half tensor an op keeps for backward (dtype_rules._keep_half) as the float32 value its backward
    reads: ggrad's own saved-tensor unpacking, which backward_replay tells from a user's hooks."""
    return t if t.dtype is f32 else t.to(f32)
