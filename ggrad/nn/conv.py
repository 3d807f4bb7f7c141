"""Convolution layers: `Conv1d`, `Conv2d`, `ConvTranspose1d`, `ConvTranspose2d` (pooling: pooling.py)."""

import math

from ..autograd.factory import empty
from ..ggml.errors import ShapeError
from . import functional as F
from . import init
from .module import Module
from ..autograd import Parameter


_PADDING_MODES = {"zeros": "constant", "reflect": "reflect", "replicate": "replicate", "circular": "circular"}


def _ntuple(value, n, name, layer):
    values = (value,) * n if isinstance(value, int) else tuple(value)
    if len(values) != n or any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        raise ValueError(f"{layer}: {name} must be an int or a tuple of {n} ints, got {value!r}")
    return values


class _ConvNd(Module):
    """What the convolutions share: parameters, init, checks, the forward (by `conv`) and repr."""

    n = 0
    conv = None   # the functional convolution of the subclass's rank (F.conv1d, F.conv2d, conv3d)
    transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, device,
                 dtype, padding_mode="zeros"):
        super().__init__()
        layer = type(self).__name__
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {set(_PADDING_MODES)}, but got padding_mode='{padding_mode}'")
        if self.transposed and padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {layer}')
        self.padding_mode = padding_mode
        for name, value in (("in_channels", in_channels), ("out_channels", out_channels), ("groups", groups)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{layer}: {name} must be a positive integer, got {value!r}")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{layer}: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                             f"divisible by groups ({groups})")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.groups = groups
        self.kernel_size = _ntuple(kernel_size, self.n, "kernel_size", layer)
        self.stride = _ntuple(stride, self.n, "stride", layer)
        self.dilation = _ntuple(dilation, self.n, "dilation", layer)
        self.padding = self._resolve_padding(padding, layer)
        if any(v <= 0 for v in self.kernel_size + self.stride + self.dilation):
            raise ValueError(f"{layer}: kernel_size, stride and dilation must be positive, got "
                             f"{self.kernel_size}, {self.stride}, {self.dilation}")
        if self.transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(empty(shape, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _resolve_padding(self, padding, layer):
        if padding == "valid":
            return (0,) * self.n
        if padding == "same" and not self.transposed:
            if any(s != 1 for s in self.stride):
                raise ValueError(f"{layer}: padding='same' is not supported for strided convolutions")
            totals = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            if any(t % 2 for t in totals):
                return "same"   # uneven: F pads the extra zero on the right, as PyTorch
            return tuple(t // 2 for t in totals)
        pads = _ntuple(padding, self.n, "padding", layer)
        if any(p < 0 for p in pads):
            raise ValueError(f"{layer}: padding must be non-negative, got {padding!r}")
        return pads

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
            bound = 1.0 / math.sqrt(fan_in)
            init.uniform_(self.bias, -bound, bound)

    def _check_input(self, x):
        """The input as a batch (N, C, ...), and whether it was unbatched."""
        batched_ndim = self.n + 2
        if x.ndim not in (batched_ndim - 1, batched_ndim):
            raise ShapeError(f"{self._describe()}: expected {batched_ndim - 1}-D (unbatched) or {batched_ndim}-D "
                             f"input, got shape {tuple(x.shape)}")
        unbatched = x.ndim == batched_ndim - 1
        if unbatched:
            x = x.unsqueeze(0)
        if x.shape[1] != self.in_channels:
            raise ShapeError(f"{self._describe()}: expected input with {self.in_channels} channels, got "
                             f"{x.shape[1]} channels in input of shape {tuple(x.shape[1:] if unbatched else x.shape)}")
        if self.padding == "same" or self.transposed:
            return x, unbatched
        for i in range(self.n):
            size = x.shape[2 + i] + 2 * self.padding[i]
            reach = self.dilation[i] * (self.kernel_size[i] - 1) + 1
            if size < reach:
                raise ShapeError(f"{self._describe()}: input of shape {tuple(x.shape)} (padded size {size}) is "
                                 f"smaller than the kernel's reach {reach}")
        return x, unbatched

    def _padded(self, x):
        """x padded by padding_mode ('reflect', 'replicate', 'circular'; F.pad's modes) and the padding left
        to the convolution: zero after an explicit pad, self.padding for padding_mode='zeros'."""
        if self.padding_mode == "zeros":
            return x, self.padding
        amounts = []
        for i in reversed(range(self.n)):
            if self.padding == "same":
                total = self.dilation[i] * (self.kernel_size[i] - 1)
                amounts += [total // 2, total - total // 2]
            else:
                amounts += [self.padding[i], self.padding[i]]
        return F.pad(x, amounts, mode=_PADDING_MODES[self.padding_mode]), 0

    def forward(self, x):
        x, unbatched = self._check_input(x)
        x, padding = self._padded(x)
        y = self.conv(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)
        return y.squeeze(0) if unbatched else y

    def _describe(self):
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size})"

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding == "same" or any(self.padding):
            s += f", padding={self.padding}"
        if any(d != 1 for d in self.dilation):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """1-D convolution (cross-correlation) over an input of shape (N, C_in, L).

    y[n, o, l] = bias[o] + sum_{c, k} weight[o, c, k] * x[n, c, stride * l + dilation * k - padding]

    Args:
        in_channels (int): channels of the input.
        out_channels (int): channels of the output.
        kernel_size (int or (int,)): kernel width.
        stride (int, default 1): step between windows.
        padding (int, 'valid' or 'same', default 0): zeros added on both sides.
        dilation (int, default 1): spacing between kernel taps.
        groups (int, default 1): channel groups convolved separately (C_in and C_out divisible by it).
        bias (bool, default True): learn a per-channel bias.
        padding_mode (str, default 'zeros'): 'zeros', 'reflect', 'replicate' or 'circular' (as F.pad's modes).
        device, dtype (optional): where the parameters live and their dtype.

    Shape: (N, C_in, L) or (C_in, L) -> (N, C_out, L_out), L_out = (L + 2p - d (k - 1) - 1) // s + 1.
    Init: weight, bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = C_in / groups * k, as PyTorch.
    """

    n = 1
    conv = staticmethod(F.conv1d)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, device,
                         dtype, padding_mode)


class Conv2d(_ConvNd):
    """2-D convolution (cross-correlation) over an input of shape (N, C_in, H, W).

    y[n, o, i, j] = bias[o] + sum_{c, u, v} weight[o, c, u, v] * x[n, c, s0 i + d0 u - p0, s1 j + d1 v - p1]

    Args:
        in_channels (int): channels of the input.
        out_channels (int): channels of the output.
        kernel_size (int or (int, int)): kernel height and width.
        stride (int or (int, int), default 1): step between windows.
        padding (int, (int, int), 'valid' or 'same', default 0): zeros added on both sides.
        dilation (int or (int, int), default 1): spacing between kernel taps.
        groups (int, default 1): channel groups convolved separately (C_in and C_out divisible by it).
        bias (bool, default True): learn a per-channel bias.
        padding_mode (str, default 'zeros'): 'zeros', 'reflect', 'replicate' or 'circular' (as F.pad's modes).
        device, dtype (optional): where the parameters live and their dtype.

    Shape: (N, C_in, H, W) or (C_in, H, W) -> (N, C_out, H_out, W_out).
    Init: weight, bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = C_in / groups * kh * kw, as PyTorch.
    """

    n = 2
    conv = staticmethod(F.conv2d)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, device,
                         dtype, padding_mode)


class _ConvTransposeNd(_ConvNd):
    """The adjoint of a convolution: each input pixel scatters weight * value into a window of the output."""

    transposed = True

    conv = None   # F.conv_transpose1d or F.conv_transpose2d

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):   # PyTorch's order
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, device,
                         dtype, padding_mode)
        self.output_padding = _ntuple(output_padding, self.n, "output_padding", type(self).__name__)

    def _output_padding(self, x, output_size):
        """PyTorch's rule: the output_padding that gives `output_size` (one of the sizes the stride allows)."""
        if output_size is None:
            return self.output_padding
        size = tuple(output_size)[-self.n:]
        if len(size) != self.n:
            raise ValueError(f"{self._describe()}: output_size must have {self.n} or more entries, got {output_size}")
        extra = []
        for i in range(self.n):
            smallest = ((x.shape[2 + i] - 1) * self.stride[i] - 2 * self.padding[i]
                        + self.dilation[i] * (self.kernel_size[i] - 1) + 1)
            if not smallest <= size[i] < smallest + self.stride[i]:
                raise ValueError(f"{self._describe()}: requested an output size of {size}, but valid sizes range "
                                 f"from {smallest} to {smallest + self.stride[i] - 1} in dim {i} (input {x.shape})")
            extra.append(size[i] - smallest)
        return tuple(extra)

    def forward(self, x, output_size=None):
        x, unbatched = self._check_input(x)
        y = self.conv(x, self.weight, self.bias, self.stride, self.padding, self._output_padding(x, output_size),
                 self.groups, self.dilation)
        return y.squeeze(0) if unbatched else y

    def extra_repr(self):
        s = super().extra_repr()
        return s + (f", output_padding={self.output_padding}" if any(self.output_padding) else "")


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-D convolution over (N, C_in, L): L_out = (L - 1) s - 2p + d (k - 1) + output_padding + 1.

    Weight (C_in, C_out / groups, k); init as PyTorch (fan_in = C_out / groups * k).
    """

    n = 1
    conv = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """Transposed 2-D convolution over (N, C_in, H, W); each spatial dim as ConvTranspose1d's.

    Weight (C_in, C_out / groups, kh, kw); init as PyTorch (fan_in = C_out / groups * kh * kw).
    """

    n = 2
    conv = staticmethod(F.conv_transpose2d)
