"""Window parameters of convolutions and pools (kernel size, stride, padding, dilation) and the output size
they give, checked with PyTorch's errors where the public function is, before GGML's im2col or pool_2d sees
them (GGML divides by the stride and reports a window past the input with its own reversed shapes).

Every public function and its aliases share these checks: `ggrad.conv2d` and `nn.functional.conv2d`,
`ggrad.max_pool2d` and `nn.functional.max_pool2d`, and the pooling layers.
"""

from ...ggml.errors import ArgumentError, ShapeError


def ntuple(value, n, name, op):
    """`value` (an int, or a sequence of n ints or of one) as a tuple of `n` ints; ValueError otherwise."""
    values = (value,) * n if isinstance(value, int) else tuple(value)
    if len(values) == 1 and n > 1:
        values = values * n
    if len(values) != n or any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        raise ValueError(f"{op}: {name} must be an int or a tuple of {n} ints, got {value!r}")
    return values


def conv_settings(op, n, stride, padding, dilation):
    """(stride, padding, dilation) of an `n`-D convolution as tuples, refused as PyTorch refuses them:
    a stride or dilation below 1, a negative padding (ArgumentError, a RuntimeError)."""
    s, p, d = ntuple(stride, n, "stride", op), ntuple(padding, n, "padding", op), ntuple(dilation, n, "dilation", op)
    if any(v <= 0 for v in s):
        raise ArgumentError(f"{op}: non-positive stride is not supported, got stride={s}")
    if any(v < 0 for v in p):
        raise ArgumentError(f"{op}: negative padding is not supported, got padding={p}")
    if any(v <= 0 for v in d):
        raise ArgumentError(f"{op}: dilation should be greater than zero, but got dilation={d}")
    return s, p, d


def conv_outs(op, spatial, kernel, s, p, d):
    """The output size of a convolution of an input of `spatial` size with a `kernel`: ShapeError where the
    dilated kernel is larger than the padded input (PyTorch's "Kernel size can't be greater than actual
    input size")."""
    padded = tuple(n + 2 * pi for n, pi in zip(spatial, p))
    dilated = tuple(di * (k - 1) + 1 for k, di in zip(kernel, d))
    if any(k > n for k, n in zip(dilated, padded)):
        raise ShapeError(f"{op}: calculated padded input size per channel: {padded}. Kernel size: {dilated} "
                         f"(dilation {d}). Kernel size can't be greater than actual input size")
    return tuple((n - k) // si + 1 for n, k, si in zip(padded, dilated, s))


def pool_settings(op, n, kernel_size, stride, padding, dilation):
    """(kernel, stride, padding, dilation) of an `n`-D pool as tuples (stride defaults to the kernel),
    refused as PyTorch refuses them: a kernel, stride or dilation below 1, a padding negative or past half
    the kernel (ArgumentError, a RuntimeError)."""
    k = ntuple(kernel_size, n, "kernel_size", op)
    s = k if stride is None or stride == () or stride == [] else ntuple(stride, n, "stride", op)
    p = ntuple(padding, n, "padding", op)
    d = ntuple(dilation, n, "dilation", op)
    if any(v <= 0 for v in k + s + d):
        raise ArgumentError(f"{op}: kernel_size, stride and dilation must be positive, got {k}, {s}, {d}")
    if any(pi < 0 or 2 * pi > ki for pi, ki in zip(p, k)):
        raise ArgumentError(f"{op}: padding should be at most half of kernel size, but got padding={p} and "
                            f"kernel_size={k}")
    return k, s, p, d


def out_size(n, k, s, p, d, ceil_mode):
    """PyTorch's output length of a pool: floor or ceil of the window count; a last window must start inside
    the input or its left padding."""
    span = n + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def pool_outs(op, shape, k, s, p, d, ceil_mode):
    """The output size of a pool over the trailing len(k) dimensions of `shape`: ShapeError where a window
    does not fit (PyTorch's "Output size is too small")."""
    spatial = shape[len(shape) - len(k):]
    outs = tuple(out_size(spatial[i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(len(k)))
    if any(o < 1 for o in outs):
        raise ShapeError(f"{op}: input of shape {tuple(shape)} is smaller than the kernel {k} (padding {p}, "
                         f"dilation {d}): the calculated output size {outs} is too small")
    return outs
