"""`ggrad.testing`: PyTorch's torch.testing.assert_close, for ggrad tensors (and complex ones), numbers and
lists, tuples and dicts of them.

Default tolerances by dtype as PyTorch's (float32: rtol 1.3e-6, atol 1e-5; float16: 1e-3, 1e-5; bfloat16:
1.6e-2, 1e-5; Python floats: 1e-7, 1e-7; integers and bool: exact). Tensors compare in float32 (complex64),
as PyTorch's do in their common dtype; the AssertionError says how many elements differ and where the
greatest differences are, in PyTorch's words.
"""

from __future__ import annotations

import collections.abc
from typing import Any

import numpy as np

from .autograd.complex_tensor import ComplexTensor
from .autograd.tensor import Tensor

__all__ = ["assert_close"]

_TOLERANCES = {"f16": (1e-3, 1e-5), "bf16": (1.6e-2, 1e-5), "f32": (1.3e-6, 1e-5), "c64": (1.3e-6, 1e-5)}
_PYTHON_FLOAT = (1e-7, 1e-7)


def assert_close(actual: Any, expected: Any, *, allow_subclasses: bool = True, rtol: float | None = None,
                 atol: float | None = None, equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True, check_stride: bool = False,
                 msg: str | None = None) -> None:
    """AssertionError unless `actual` and `expected` are close: |actual - expected| <= atol + rtol |expected|
    elementwise (nan equal to nan with `equal_nan`), with the same shape, and the same dtype and device unless
    `check_dtype` / `check_device` say otherwise. `msg` replaces the message."""
    if (rtol is None) != (atol is None):
        missing = "atol" if atol is None else "rtol"
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {missing}.")
    options = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=check_device, check_dtype=check_dtype)
    try:
        _compare(actual, expected, options)
    except AssertionError as e:
        raise AssertionError(msg if msg is not None else str(e)) from None


def _is_tensor(x):
    return isinstance(x, (Tensor, ComplexTensor))


def _compare(actual, expected, options, path=()):
    """Compare two inputs; inside a list, tuple or dict, the failure names the item's `path`, as PyTorch's."""
    numbers = (bool, int, float, complex, np.number)
    leaf = None
    if _is_tensor(actual) and _is_tensor(expected):
        leaf = _compare_tensors
    elif isinstance(actual, numbers) and isinstance(expected, numbers):
        leaf = _compare_scalars
    if leaf is not None:
        try:
            return leaf(actual, expected, options)
        except AssertionError as e:
            if not path:
                raise
            where = "".join(f"[{key!r}]" for key in path)
            raise AssertionError(f"{e}\n\nThe failure occurred for item {where}") from None
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
        if set(actual) != set(expected):
            raise AssertionError(f"The keys of the mappings do not match: {sorted(map(str, actual))} != "
                                 f"{sorted(map(str, expected))}")
        for key in expected:
            _compare(actual[key], expected[key], options, path + (key,))
        return None
    sequences = (list, tuple)
    if isinstance(actual, sequences) and isinstance(expected, sequences):
        if len(actual) != len(expected):
            raise AssertionError(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, options, path + (i,))
        return None
    raise TypeError(f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}.")


def _tolerances(dtype_name, options):
    if options["rtol"] is not None:
        return options["rtol"], options["atol"]
    return _TOLERANCES.get(dtype_name, (0.0, 0.0))


def _compare_tensors(actual, expected, options):
    if actual.shape != expected.shape:
        raise AssertionError(f"The values for attribute 'shape' do not match: {tuple(actual.shape)} != "
                             f"{tuple(expected.shape)}.")
    if options["check_device"] and actual.device != expected.device:
        raise AssertionError(f"The values for attribute 'device' do not match: {actual.device} != {expected.device}.")
    if options["check_dtype"] and actual.dtype is not expected.dtype:
        raise AssertionError(f"The values for attribute 'dtype' do not match: {actual.dtype!r} != {expected.dtype!r}.")
    # without check_dtype, the looser tolerance of the two
    rtol, atol = max(_tolerances(actual.dtype.name, options), _tolerances(expected.dtype.name, options))
    a, e = _values(actual), _values(expected)
    exact = a.dtype.kind in "iub" and e.dtype.kind in "iub" and rtol == 0 and atol == 0
    _check_values(a, e, rtol, atol, options["equal_nan"], "Tensor-likes", exact)


def _values(t):
    values = t.detach().numpy()
    return values.astype(np.complex64 if values.dtype.kind == "c" else np.float32) \
        if values.dtype.kind in "fc" else values


def _close(a, e, rtol, atol, equal_nan):
    with np.errstate(invalid="ignore"):
        close = (a == e) | (np.abs(a - e) <= atol + rtol * np.abs(e))
    if equal_nan:
        close |= np.isnan(a) & np.isnan(e)
    return close


def _check_values(a, e, rtol, atol, equal_nan, what, exact):
    close = (a == e) if exact else _close(a, e, rtol, atol, equal_nan)
    if close.all():
        return
    a32, e32 = (x.astype(np.float32) if x.dtype.kind in "iub" else x for x in (a, e))
    with np.errstate(invalid="ignore", divide="ignore"):
        absolute = np.abs(a32 - e32)
        relative = absolute / np.abs(e32)
    absolute = np.where(close, 0, absolute)
    relative = np.where(close, 0, relative)
    where_abs = np.unravel_index(_argmax(absolute), a.shape)
    where_rel = np.unravel_index(_argmax(relative), a.shape)
    greatest_abs = int(absolute[where_abs]) if exact else float(absolute[where_abs])
    mismatched = int((~close).sum())
    lines = [f"{what} are not {'equal' if exact else 'close'}!", "",
             f"Mismatched elements: {mismatched} / {close.size} ({100 * mismatched / close.size:.1f}%)",
             f"Greatest absolute difference: {greatest_abs} at index {tuple(int(i) for i in where_abs)}"
             + ("" if exact else f" (up to {atol} allowed)"),
             f"Greatest relative difference: {float(relative[where_rel])} at index "
             f"{tuple(int(i) for i in where_rel)}" + ("" if exact else f" (up to {rtol} allowed)")]
    raise AssertionError("\n".join(lines))


def _argmax(values):
    """The flat index of the greatest value, a nan first (numpy's argmax stops at the first nan too)."""
    return int(np.argmax(values)) if values.size else 0


def _compare_scalars(actual, expected, options):
    is_float = any(isinstance(x, (float, complex, np.floating, np.complexfloating)) for x in (actual, expected))
    rtol, atol = (options["rtol"], options["atol"]) if options["rtol"] is not None else \
        (_PYTHON_FLOAT if is_float else (0.0, 0.0))
    a, e = np.array(actual, np.complex128 if isinstance(actual, complex) else np.float64), \
        np.array(expected, np.complex128 if isinstance(expected, complex) else np.float64)
    if _close(a, e, rtol, atol, options["equal_nan"]):
        return
    difference = abs(actual - expected)
    relative = difference / abs(expected) if expected != 0 else float("inf")
    if is_float:
        raise AssertionError(f"Scalars are not close!\n\nExpected {expected} but got {actual}.\nAbsolute difference: "
                             f"{difference} (up to {atol} allowed)\nRelative difference: {relative} (up to {rtol} "
                             "allowed)")
    raise AssertionError(f"Scalars are not equal!\n\nExpected {expected} but got {actual}.\nAbsolute difference: "
                         f"{difference}\nRelative difference: {relative}")
