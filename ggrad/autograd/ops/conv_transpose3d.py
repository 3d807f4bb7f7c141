"""`conv_transpose3d` (F.conv_transpose3d): the transposed 3-D convolution as a sum over the kernel's depth
of 2-D transposed convolutions.

For each kernel depth i, every input depth slice goes through GGML-backed `conv_transpose2d` with
weight[:, :, i]; slice d lands at output depth d * stride + i * dilation (the slices spread `stride` apart by
zero rows, then shifted by i * dilation); the shifted sums are cropped by the padding. Gradients flow through
the 2-D transposed convolutions, the pads and the crop.
"""

from ..arguments import TENSOR, require
from ...ggml.errors import ArgumentError, ShapeError
from .conv import conv_transpose2d
from .shape_ops import pad
from .windows import conv_settings, ntuple


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,  # noqa: A002
                     dilation=1):
    """Transposed 3-D convolution of input (N, C, D, H, W) (or unbatched (C, D, H, W)) with weight
    (C, O / groups, kD, kH, kW): D_out = (D - 1) stride - 2 padding + dilation (kD - 1) + output_padding + 1,
    and the same for H and W."""
    op = "conv_transpose3d"
    require(op, "input", input, TENSOR)
    require(op, "weight", weight, TENSOR)
    if input.ndim not in (4, 5) or weight.ndim != 5:
        raise ShapeError(f"{op}: expected a 4-D or 5-D input and a 5-D weight, got {tuple(input.shape)} and "
                         f"{tuple(weight.shape)}")
    x = input if input.ndim == 5 else input.unsqueeze(0)
    s, p, d = conv_settings(op, 3, stride, padding, dilation)
    extra = ntuple(output_padding, 3, "output_padding", op)
    if any(v < 0 for v in extra):
        raise ArgumentError(f"{op}: negative output_padding is not supported, got output_padding={extra}")
    if extra[0] >= max(s[0], d[0]):
        raise ValueError(f"{op}: output_padding {extra} must be smaller than stride {s} or dilation {d}")
    n, c, depth, height, width = x.shape
    if groups < 1 or c % groups or weight.shape[0] != c:
        raise ShapeError(f"{op}: weight {tuple(weight.shape)} needs {c} input channels in dim 0, divisible by "
                         f"groups={groups} (input {tuple(x.shape)})")
    k = weight.shape[2]
    full = (depth - 1) * s[0] + d[0] * (k - 1) + 1 + extra[0]       # the depth before the padding's crop
    out_depth = full - 2 * p[0]
    if out_depth <= 0:
        raise ShapeError(f"{op}: the output depth {out_depth} is not positive (input {tuple(x.shape)}, weight "
                         f"{tuple(weight.shape)})")
    slices = x.movedim(2, 1).reshape(n * depth, c, height, width)
    spread = (depth - 1) * s[0] + 1
    total = None
    for i in range(k):
        y = conv_transpose2d(slices, weight[:, :, i], None, s[1:], p[1:], extra[1:], groups, d[1:])
        features = y.shape[1:]
        y = y.reshape(n, depth, 1, -1)
        if s[0] > 1:   # slice d at depth d * stride: stride - 1 zero rows after each
            y = pad(y, (0, 0, 0, s[0] - 1)).reshape(n, depth * s[0], -1)[:, :spread]
        else:
            y = y.reshape(n, depth, -1)
        y = pad(y, (0, 0, i * d[0], full - spread - i * d[0]))
        total = y if total is None else total + y
    out = total[:, p[0]:p[0] + out_depth].reshape(n, out_depth, *features).movedim(1, 2)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    return out if input.ndim == 5 else out.squeeze(0)
