"""Convolutions with PyTorch's full signature: groups, padding="same"/"valid", and the transposed ones.

Ungrouped convolutions go to nn.py's im2col + matmul path.

A grouped convolution unfolds the input once (GGML im2col, channel-major columns), then multiplies each
group's columns by its filters in one batched matmul. A transposed convolution is the adjoint of a
convolution: its input times the filters gives patch gradients, which GGML's im2col_back sums into the
output (the gradient of that is im2col again, so it is differentiable to any order).
"""

from ...ggml.errors import ArgumentError, ShapeError
from ..autocast_hook import LOWER, autocast_op
from ..dtype_rules import as_float32
from . import neural
from . import views as mv
from .view_primitives import prod
from . import windows
from .products import matmul
from .shape_ops import pad as _pad
from ..declaration import declare


class Col2Im(neural.Im2ColBack):
    """Patch values (N, OH, OW, C*KH*KW) summed into an image of `in_shape`; backward unfolds again."""

    @staticmethod
    def build(ctx, graph, g, in_shape, kernel_shape, s, p, d, is_2d):
        ctx.unfold = (kernel_shape, s, p, d, is_2d)
        return neural.Im2ColBack.build(ctx, graph, g, in_shape, kernel_shape, s, p, d, is_2d)

    @staticmethod
    def backward(ctx, g):
        return (neural.Im2Col.apply(g, *ctx.unfold),) + (None,) * 6


def _same_padding(x, kernel, dilation, stride, op):
    """F.pad amounts (last dim first) for padding='same' (stride 1; the odd extra on the right)."""
    if any(s != 1 for s in stride):
        raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
    amounts = []
    for k, d in zip(reversed(kernel), reversed(dilation)):
        total = d * (k - 1)
        amounts += [total // 2, total - total // 2]
    return amounts


def _conv(x, weight, bias, stride, padding, dilation, groups, n, op):
    if x.ndim != n + 2 or weight.ndim != n + 2:
        raise ShapeError(f"{op}: expected {n + 2}-D input and weight, got {x.shape} and {weight.shape}")
    named = padding if isinstance(padding, str) else None
    if named not in (None, "same", "valid"):
        raise ValueError(f"{op}: padding must be 'same', 'valid' or numbers, got {padding!r}")
    s, p, d = windows.conv_settings(op, n, stride, 0 if named else padding, dilation)
    if named == "same":
        x = _pad(x, _same_padding(x, weight.shape[2:], d, s, op))
    c, o = x.shape[1], weight.shape[0]
    if groups < 1 or c % groups or o % groups:
        raise ValueError(f"{op}: groups={groups} must divide the input channels ({c}) and the output channels ({o})")
    if weight.shape[1] * groups != c:
        raise ShapeError(f"{op}: weight {weight.shape} with groups={groups} expects {weight.shape[1] * groups} input "
                         f"channels, got {c} (input {x.shape})")
    windows.conv_outs(op, x.shape[2:], weight.shape[2:], s, p, d)
    plain = neural.conv2d if n == 2 else neural.conv1d
    if groups == 1:
        return plain(x, weight, bias, s if n == 2 else s[0], p if n == 2 else p[0], d if n == 2 else d[0])
    kernel = (o, c) + tuple(weight.shape[2:])   # im2col reads the spatial size and the input channels
    if n == 2:
        cols = neural.Im2Col.apply(as_float32(x, op), kernel, s, p, d, True)         # (N, OH, OW, C*K)
    else:
        cols = neural.Im2Col.apply(as_float32(x, op), kernel, (1, s[0]), (0, p[0]), (1, d[0]), False)
    spatial = cols.shape[1:-1]
    rows = prod(cols.shape[:-1])
    per_group = cols.shape[-1] // groups
    grouped = mv.permute(mv.reshape(cols, rows, groups, per_group), 1, 0, 2)       # (G, rows, C/G*K)
    filters = mv.reshape(weight, groups, o // groups, per_group)                   # (G, O/G, C/G*K)
    out = matmul(grouped, mv.transpose(filters, -1, -2))                           # (G, rows, O/G)
    out = mv.reshape(mv.permute(out, 1, 0, 2), x.shape[0], prod(spatial), o)   # (N, L, O)
    out = mv.reshape(mv.contiguous(mv.permute(out, 0, 2, 1)), (x.shape[0], o) + spatial)
    if bias is not None:
        out = out + mv.reshape(bias, (1, o) + (1,) * n)
    return out


@declare()
@autocast_op("conv2d", LOWER)
def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution of x (N, C, H, W) with weight (O, C/groups, KH, KW)."""
    return _conv(x, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


@declare()
@autocast_op("conv1d", LOWER)
def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution of x (N, C, L) with weight (O, C/groups, K)."""
    return _conv(x, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


def _conv_transpose(x, weight, bias, stride, padding, output_padding, groups, dilation, n, op):
    if x.ndim != n + 2 or weight.ndim != n + 2:
        raise ShapeError(f"{op}: expected {n + 2}-D input and weight, got {x.shape} and {weight.shape}")
    s, p, d = windows.conv_settings(op, n, stride, padding, dilation)
    op_ = windows.ntuple(output_padding, n, "output_padding", op)
    if any(v < 0 for v in op_):
        raise ArgumentError(f"{op}: negative output_padding is not supported, got output_padding={op_}")
    c = x.shape[1]
    if groups < 1 or c % groups or weight.shape[0] != c:
        raise ShapeError(f"{op}: weight {weight.shape} needs {c} input channels in dim 0, divisible by "
                         f"groups={groups} (input {x.shape})")
    for i in range(n):
        if op_[i] >= max(s[i], d[i]):
            raise ValueError(f"{op}: output_padding {op_} must be smaller than stride {s} or dilation {d}")
    o_per = weight.shape[1]
    o = o_per * groups
    k = weight.shape[2:]
    out_spatial = tuple((x.shape[2 + i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op_[i] + 1 for i in range(n))
    if any(v <= 0 for v in out_spatial):
        raise ShapeError(f"{op}: the output size {out_spatial} is not positive (input {x.shape}, "
                         f"weight {weight.shape})")
    batch, spatial = x.shape[0], x.shape[2:]
    rows = batch * prod(spatial)
    per = prod(k)
    src = mv.reshape(mv.contiguous(mv.permute(as_float32(x, op), (0,) + tuple(range(2, n + 2)) + (1,))), rows, c)
    grouped = mv.permute(mv.reshape(src, rows, groups, c // groups), 1, 0, 2)       # (G, rows, C/G)
    filters = mv.reshape(weight, groups, c // groups, o_per * per)                  # (G, C/G, O/G*K)
    patches = matmul(grouped, filters)                                              # (G, rows, O/G*K)
    patches = mv.reshape(mv.permute(patches, 1, 0, 2), (batch,) + spatial + (o * per,))
    in_shape = (batch, o) + out_spatial
    kernel = (o, o) + k   # only its spatial size is read
    if n == 2:
        out = Col2Im.apply(patches, in_shape, kernel, s, p, d, True)
    else:
        out = Col2Im.apply(patches, in_shape, kernel, (1, s[0]), (0, p[0]), (1, d[0]), False)
    if bias is not None:
        out = out + mv.reshape(bias, (1, o) + (1,) * n)
    return out


@declare()
@autocast_op("conv_transpose2d", LOWER)
def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed 2-D convolution of x (N, C, H, W) with weight (C, O/groups, KH, KW)."""
    return _conv_transpose(x, weight, bias, stride, padding, output_padding, groups, dilation, 2,
                           "conv_transpose2d")


@declare()
@autocast_op("conv_transpose1d", LOWER)
def conv_transpose1d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed 1-D convolution of x (N, C, L) with weight (C, O/groups, K)."""
    return _conv_transpose(x, weight, bias, stride, padding, output_padding, groups, dilation, 1,
                           "conv_transpose1d")
