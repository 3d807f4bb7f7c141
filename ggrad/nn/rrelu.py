"""RReLU (randomized leaky ReLU, Xu et al.): a random negative slope per element while training, their mean
in evaluation (PyTorch's nn.RReLU and F.rrelu)."""

from ..autograd.arguments import FLAG, NUMBER, TENSOR, ArgumentTypeError, require
from ..autograd.factory import generator as _host_generator, tensor
from ..autograd.tensor import Tensor
from ..autograd.ops import where
from .module import Module

__all__ = ["RReLU", "rrelu"]


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):  # noqa: A002 (PyTorch's names)
    """x where x >= 0, else a x with a ~ U(lower, upper) drawn per element (training) or (lower + upper) / 2.
    `inplace` writes the result into input."""
    require("rrelu", "input", input, TENSOR)
    for name, value in (("lower", lower), ("upper", upper)):
        if isinstance(value, Tensor) or not NUMBER.fits(value):
            raise ArgumentTypeError(f"rrelu(): argument '{name}' must be Number, not {type(value).__name__}")
    require("rrelu", "training", training, FLAG)
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not input.dtype.is_float:
        raise NotImplementedError(f'"leaky_relu_cpu" not implemented for \'{input.type()[6:-6]}\'')
    if training:
        slopes = _host_generator().uniform(lower, upper, size=input.shape).astype("float32")
        slope = tensor(slopes, dtype=input.dtype, device=input.device)
    else:
        slope = (lower + upper) / 2.0
    out = where(input >= 0, input, input * slope)
    return input.copy_(out) if inplace else out


class RReLU(Module):
    """`rrelu(x, lower, upper, self.training)`.

    Args:
        lower (float): the least slope. Default: 1/8.
        upper (float): the largest slope. Default: 1/3.
        inplace (bool): write into the input. Default: False.
    """

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):  # noqa: A002
        return rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")
