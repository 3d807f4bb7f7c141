"""`conv3d` (F.conv3d): 3-D convolution as a sum over the kernel's depth of 2-D convolutions.

For each kernel depth i, the input's depth slices that tap i reads (d * stride + i * dilation) are stacked into
the batch and convolved with weight[:, :, i] by GGML's 2-D convolution; the sums over i is the 3-D result.
Gradients flow through the slices and the 2-D convolutions.
"""

from ..arguments import TENSOR, require
from ..factory import arange
from ...ggml.errors import ShapeError
from .conv import conv2d
from .indexing import index_select
from .shape_ops import pad


def _triple(value, name):
    value = (value,) * 3 if isinstance(value, int) else tuple(value)
    if len(value) != 3:
        raise ValueError(f"conv3d: {name} must be an int or 3 ints, got {value}")
    return value


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002 (PyTorch's names)
    """The 3-D convolution (cross-correlation) of input (N, C, D, H, W) (or unbatched (C, D, H, W)) with weight
    (O, C / groups, kD, kH, kW); padding an int, 3 ints, "valid" or "same"."""
    require("conv3d", "input", input, TENSOR)
    require("conv3d", "weight", weight, TENSOR)
    if input.ndim not in (4, 5) or weight.ndim != 5:
        raise ShapeError(f"conv3d: expected a 4-D or 5-D input and a 5-D weight, got {tuple(input.shape)} and "
                         f"{tuple(weight.shape)}")
    x = input if input.ndim == 5 else input.unsqueeze(0)
    if x.shape[1] != weight.shape[1] * groups:
        raise ShapeError(f"conv3d: expected input with {weight.shape[1] * groups} channels, got {x.shape[1]}")
    kernel = tuple(weight.shape[2:])
    stride, dilation = _triple(stride, "stride"), _triple(dilation, "dilation")
    if padding == "same" and any(s != 1 for s in stride):
        raise ValueError("padding='same' is not supported for strided convolutions")
    if padding in ("same", "valid"):
        totals = [d * (k - 1) if padding == "same" else 0 for d, k in zip(dilation, kernel)]
        before = [t // 2 for t in totals]
        after = [t - b for t, b in zip(totals, before)]
    else:
        before = after = list(_triple(padding, "padding"))
    if any(before) or any(after):
        x = pad(x, (before[2], after[2], before[1], after[1], before[0], after[0]))
    n, c, depth, height, width = x.shape
    reach = [d * (k - 1) + 1 for d, k in zip(dilation, kernel)]
    if depth < reach[0] or height < reach[1] or width < reach[2]:
        raise ShapeError(f"conv3d: input of padded shape {tuple(x.shape)} is smaller than the kernel's reach "
                         f"{tuple(reach)}")
    out_depth = (depth - reach[0]) // stride[0] + 1
    total = None
    for i in range(kernel[0]):
        taps = arange(out_depth, device=x.device) * stride[0] + i * dilation[0]
        slab = index_select(x, 2, taps).movedim(2, 1).reshape(n * out_depth, c, height, width)
        y = conv2d(slab, weight[:, :, i], None, stride[1:], 0, dilation[1:], groups)
        total = y if total is None else total + y
    out = total.reshape(n, out_depth, *total.shape[1:]).movedim(1, 2)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    return out if input.ndim == 5 else out.squeeze(0)
