"""The padding layers of PyTorch: Zero-, Constant-, Reflection-, Replication- and CircularPad in 1, 2 and 3 dims.

Each is `F.pad(x, padding, mode, value)` with its padding fixed: an int pads every side of its last 1, 2 or 3
dims, a tuple gives (left, right[, top, bottom[, front, back]]) as F.pad reads it.
"""

from ..autograd.ops import pad
from .module import Module

__all__ = ["ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d"]


class _Pad(Module):
    """F.pad with a fixed padding over the last `dims` dims (subclasses set `dims` and `mode`)."""

    dims = 1
    mode = "constant"

    def __init__(self, padding, value=0.0):
        super().__init__()
        if isinstance(padding, int) and not isinstance(padding, bool):
            padding = (padding,) * (2 * self.dims)
        padding = tuple(padding)
        if len(padding) != 2 * self.dims or not all(isinstance(p, int) for p in padding):
            raise ValueError(f"{type(self).__name__}: padding must be an int or {2 * self.dims} ints, got {padding}")
        self.padding, self.value = padding, value

    def forward(self, input):  # noqa: A002 (PyTorch's name)
        if self.mode == "constant":
            return pad(input, self.padding, mode="constant", value=self.value)
        return pad(input, self.padding, mode=self.mode)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}" if self.mode == "constant" else f"{self.padding}"


def _layer(name, dims, mode, doc, zero=False):
    body = {"dims": dims, "mode": mode, "__doc__": doc, "__module__": __name__}
    if zero:
        body["__init__"] = lambda self, padding: _Pad.__init__(self, padding, 0.0)
        body["extra_repr"] = lambda self: f"{self.padding}"
    return type(name, (_Pad,), body)


ZeroPad1d = _layer("ZeroPad1d", 1, "constant", "Pad the last dim with zeros.", zero=True)
ZeroPad2d = _layer("ZeroPad2d", 2, "constant", "Pad the last 2 dims with zeros.", zero=True)
ZeroPad3d = _layer("ZeroPad3d", 3, "constant", "Pad the last 3 dims with zeros.", zero=True)
ConstantPad1d = _layer("ConstantPad1d", 1, "constant", "Pad the last dim with `value`.")
ConstantPad2d = _layer("ConstantPad2d", 2, "constant", "Pad the last 2 dims with `value`.")
ConstantPad3d = _layer("ConstantPad3d", 3, "constant", "Pad the last 3 dims with `value`.")
ReflectionPad1d = _layer("ReflectionPad1d", 1, "reflect", "Pad the last dim with its reflection (edge not repeated).")
ReflectionPad2d = _layer("ReflectionPad2d", 2, "reflect", "Pad the last 2 dims with their reflection.")
ReflectionPad3d = _layer("ReflectionPad3d", 3, "reflect", "Pad the last 3 dims with their reflection.")
ReplicationPad1d = _layer("ReplicationPad1d", 1, "replicate", "Pad the last dim by repeating its edge.")
ReplicationPad2d = _layer("ReplicationPad2d", 2, "replicate", "Pad the last 2 dims by repeating their edges.")
ReplicationPad3d = _layer("ReplicationPad3d", 3, "replicate", "Pad the last 3 dims by repeating their edges.")
CircularPad1d = _layer("CircularPad1d", 1, "circular", "Pad the last dim by wrapping around.")
CircularPad2d = _layer("CircularPad2d", 2, "circular", "Pad the last 2 dims by wrapping around.")
CircularPad3d = _layer("CircularPad3d", 3, "circular", "Pad the last 3 dims by wrapping around.")
