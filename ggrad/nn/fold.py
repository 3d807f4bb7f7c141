"""The Unfold (im2col) and Fold (col2im) layers of PyTorch, over F.unfold and F.fold."""

from ..autograd.ops.sliding_windows import col2im, im2col
from .module import Module

__all__ = ["Unfold", "Fold"]


class Unfold(Module):
    """Every sliding `kernel_size` patch of a (N, C, H, W) input as a column: (N, C kh kw, L).

    Args:
        kernel_size (int or tuple): the patch size.
        dilation, padding, stride (int or tuple): as in convolutions. Default: 1, 0, 1.
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):  # noqa: A002 (PyTorch's name)
        return im2col(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")


class Fold(Module):
    """Columns (N, C kh kw, L) summed back into a (N, C, *output_size) image where their patches overlap.

    Args:
        output_size (int or tuple): the image's spatial size.
        kernel_size (int or tuple): the patch size.
        dilation, padding, stride (int or tuple): as in convolutions. Default: 1, 0, 1.
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):  # noqa: A002
        return col2im(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")
