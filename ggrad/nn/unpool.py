"""Max unpooling, as torch's: `max_unpool1d`, `max_unpool2d` and the layers MaxUnpool1d, MaxUnpool2d.

The inverse of max pooling with return_indices: each pooled value is written back at its index (the flat
spatial position max_pool gave it) in a zero output of the unpooled size, everything else stays zero.
The write is a scatter over the flattened spatial dims, so the gradient of the input is the output's
gradient gathered at the same indices (graph nodes both ways).
"""

from ..autograd.factory import zeros
from ..autograd.ops.indexing import count_outside
from ..autograd.ops.sampling import check_values
from ..autograd.ops.windows import ntuple as _ntuple
from ..ggml.errors import ShapeError
from .module import Module


def _output_size(input, kernel, stride, padding, output_size, n):  # noqa: A002
    """torch's unpooled size: (in - 1) * stride - 2 * padding + kernel, or output_size within a stride of it."""
    default = [(input.shape[input.ndim - n + i] - 1) * stride[i] + kernel[i] - 2 * padding[i] for i in range(n)]
    if output_size is None:
        return tuple(default)
    sizes = list(output_size)
    if len(sizes) == n + 2:
        sizes = sizes[2:]
    if len(sizes) != n:
        raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} elements, but it has a "
                         f"length of '{len(sizes)}'")
    for i in range(n):
        low, high = default[i] - stride[i], default[i] + stride[i]
        if not low < sizes[i] < high:
            raise ValueError(f'invalid output_size "{tuple(sizes)}" (dim {i} must be between {low} and {high})')
    return tuple(int(s) for s in sizes)


def _max_unpool(input, indices, kernel_size, stride, padding, output_size, n, op):  # noqa: A002
    kernel = _ntuple(kernel_size, n, "kernel_size", op)
    stride = kernel if stride is None else _ntuple(stride, n, "stride", op)
    padding = _ntuple(padding, n, "padding", op)
    if input.ndim not in (n + 1, n + 2):
        raise ShapeError(f"{op}: expected a {n + 1}-D or {n + 2}-D input, got shape {tuple(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) "
                           f"but got indices tensor with shape: {list(indices.shape)}")
    out = _output_size(input, kernel, stride, padding, output_size, n)
    lead = tuple(input.shape[:input.ndim - n])
    volume = 1
    for s in out:
        volume *= s
    flat_index = indices.reshape(lead + (-1,))
    check_values(flat_index.float(), lambda t: count_outside(t, 0.0, volume - 1.0),
                 f"Found an invalid max index (output volumes are of size {'x'.join(map(str, out))})")
    values = input.reshape(lead + (-1,))
    written = zeros(lead + (volume,), device=input.device).scatter(len(lead), flat_index, values)
    return written.reshape(lead + out)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """(N, C, L) or (C, L) pooled values written back at their indices in zeros of length
    (L - 1) * stride - 2 * padding + kernel_size (or output_size)."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d")


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """(N, C, H, W) or (C, H, W) pooled values written back at their flat indices h * W_out + w."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d")


class _MaxUnpool(Module):
    n = 0
    fn = None

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        name = type(self).__name__
        self.kernel_size = _ntuple(kernel_size, self.n, "kernel_size", name)
        self.stride = self.kernel_size if stride is None else _ntuple(stride, self.n, "stride", name)
        self.padding = _ntuple(padding, self.n, "padding", name)

    def forward(self, input, indices, output_size=None):  # noqa: A002
        return type(self).fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpool):
    """The inverse of MaxPool1d given its indices, as torch's `nn.MaxUnpool1d`.

    Args: kernel_size (int), stride (int, optional; defaults to kernel_size), padding (int, default 0).
    forward(input, indices, output_size=None).
    """

    n = 1
    fn = staticmethod(max_unpool1d)


class MaxUnpool2d(_MaxUnpool):
    """The inverse of MaxPool2d given its indices, as torch's `nn.MaxUnpool2d` (sizes are ints or pairs)."""

    n = 2
    fn = staticmethod(max_unpool2d)
