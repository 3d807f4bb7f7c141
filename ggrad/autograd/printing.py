"""How tensors print: `set_printoptions` (PyTorch's torch.set_printoptions) and the text of a tensor's values.

ggrad formats values with numpy's array2string (its spacing differs a little from PyTorch's); the options
map onto it: `precision` digits after the point, `threshold` elements before the middle is summarized as
"...", `edgeitems` kept at each end, `linewidth` characters a line, `sci_mode` True / False to force or
forbid scientific notation (None: as numpy chooses), and PyTorch's profiles "default", "short" and "full".
"""

import sys

import numpy as np

__all__ = ["set_printoptions", "values_text"]

_PROFILES = {"default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
             "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
             "full": dict(precision=4, threshold=float("inf"), edgeitems=3, linewidth=80)}
_options = dict(_PROFILES["default"], sci_mode=None)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """Set how tensors print (options left None keep their value, except sci_mode, which None resets)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"profile must be one of {sorted(_PROFILES)}, got {profile!r}")
        _options.update(_PROFILES[profile])
    for name, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                        ("linewidth", linewidth)):
        if value is not None:
            _options[name] = value
    _options["sci_mode"] = sci_mode


def values_text(values, prefix, formatter=None):
    """`values` (a numpy array) as array2string writes it under the current options, continuation lines
    indented by len(prefix)."""
    precision = _options["precision"]
    formatter = dict(formatter or {})
    if _options["sci_mode"] is True:
        formatter["float_kind"] = lambda v: f"{v:.{precision}e}"
    elif _options["sci_mode"] is False:
        formatter["float_kind"] = lambda v: f"{v:.{precision}f}"
    threshold = _options["threshold"]
    return np.array2string(values, separator=", ", precision=precision, prefix=prefix,
                           threshold=sys.maxsize if threshold == float("inf") else int(threshold),
                           edgeitems=_options["edgeitems"], max_line_width=_options["linewidth"],
                           formatter=formatter or None)


def tensor_text(t, values, dtype_shown):
    """PyTorch's repr of tensor `t` whose values print as `values`: `tensor(values, device=..., dtype=...,
    grad_fn=... | requires_grad=True)`, the device where not the CPU, the dtype where `dtype_shown`."""
    extra = []
    if t.device.torch_name != "cpu":
        extra.append(f"device='{t.device.torch_name}'")
    if dtype_shown:
        extra.append(f"dtype={t.dtype!r}")
    if t.grad_fn is not None:
        extra.append(f"grad_fn={t.grad_fn!r}")
    elif t.requires_grad:
        extra.append("requires_grad=True")
    return "tensor(" + ", ".join([values] + extra) + ")"
