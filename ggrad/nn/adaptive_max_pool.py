"""Adaptive max pooling over one or two dims (PyTorch's adaptive_max_pool1d / 2d and their layers): the 3-D pool
over a depth of 1 (and a height of 1), whose flat indices are then already the 1-D or 2-D ones."""

from ..autograd.arguments import TENSOR, ArgumentTypeError, require
from ..autograd.tensor import Tensor
from ..ggml.errors import ShapeError
from .module import Module
from .pooling3d import adaptive_max_pool3d, check_result_fits

__all__ = ["adaptive_max_pool1d", "adaptive_max_pool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d"]


def _parse(output_size, count, op):
    """PyTorch's parse of output_size, before the input is looked at: an int or `count` ints (None keeps the
    input's size in 2-D); else TypeError (1-D) or, for a sequence in 2-D, ValueError (an empty Tensor:
    RuntimeError), as PyTorch's Python layer reports them; a size below 1 is its RuntimeError."""
    def fits(s):
        return (isinstance(s, int) and not isinstance(s, bool)) or (s is None and count > 1)
    sizes = (output_size,) * count if fits(output_size) and output_size is not None else output_size
    if count == 2 and isinstance(sizes, Tensor) and sizes.numel() == 0:
        raise RuntimeError(f"{op}(): output_size is an empty Tensor")
    if count == 2 and hasattr(sizes, "__len__") and not (isinstance(sizes, (tuple, list)) and len(sizes) == 2 and
                                                         all(fits(s) for s in sizes)):
        raise ValueError(f"{op}(): output_size must be an int or 2 ints (or None), got {output_size!r:.60}")
    if isinstance(sizes, Tensor) or not isinstance(sizes, (tuple, list)) or len(sizes) != count or \
            not all(fits(s) for s in sizes):
        raise ArgumentTypeError(f"{op}(): argument 'output_size' must be tuple of {count} ints, not "
                                f"{type(output_size).__name__}")
    if any(s is not None and s < 1 for s in sizes):
        raise RuntimeError(f"{op}(): output_size must be positive, got {tuple(sizes)}")
    return tuple(sizes)


def _sizes(sizes, input):
    """The parsed sizes with None replaced by the input's size there."""
    return tuple(input.shape[-len(sizes) + i] if s is None else s for i, s in enumerate(sizes))


def adaptive_max_pool2d(input, output_size, return_indices=False):  # noqa: A002 (PyTorch's names)
    """The maximum of each of torch's adaptive windows of the last two dims of a (C, H, W) or (N, C, H, W)
    input; with return_indices, also each maximum's position h * W + w."""
    require("adaptive_max_pool2d", "input", input, TENSOR)
    sizes = _parse(output_size, 2, "adaptive_max_pool2d")
    if input.ndim not in (3, 4):
        raise ShapeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: {tuple(input.shape)}")
    oh, ow = _sizes(sizes, input)
    check_result_fits("adaptive_max_pool2d", input, (oh, ow))
    out = adaptive_max_pool3d(input.unsqueeze(-3), (1, oh, ow), return_indices)
    return (out[0].squeeze(-3), out[1].squeeze(-3)) if return_indices else out.squeeze(-3)


def adaptive_max_pool1d(input, output_size, return_indices=False):  # noqa: A002
    """The maximum of each of torch's adaptive windows of the last dim of a (C, L) or (N, C, L) input."""
    require("adaptive_max_pool1d", "input", input, TENSOR)
    (length,) = _parse(output_size, 1, "adaptive_max_pool1d")
    if input.ndim not in (2, 3):
        raise ShapeError(f"adaptive_max_pool1d(): Expected 2D or 3D tensor, but got: {tuple(input.shape)}")
    check_result_fits("adaptive_max_pool1d", input, (length,))
    out = adaptive_max_pool3d(input.unsqueeze(-2).unsqueeze(-2), (1, 1, length), return_indices)
    if return_indices:
        return out[0].squeeze(-2).squeeze(-2), out[1].squeeze(-2).squeeze(-2)
    return out.squeeze(-2).squeeze(-2)


class AdaptiveMaxPool2d(Module):
    """`adaptive_max_pool2d(x, output_size, return_indices)`."""

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input):  # noqa: A002
        return adaptive_max_pool2d(input, self.output_size, self.return_indices)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(AdaptiveMaxPool2d):
    """`adaptive_max_pool1d(x, output_size, return_indices)`."""

    def forward(self, input):  # noqa: A002
        return adaptive_max_pool1d(input, self.output_size, self.return_indices)
