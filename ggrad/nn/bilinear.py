"""`Bilinear` and `F.bilinear`: y = x1^T A x2 + b, one matrix A per output feature (PyTorch's nn.Bilinear)."""

import math

from ..autograd.factory import empty
from ..autograd.ops import einsum
from ..autograd import Parameter
from ..ggml.errors import ShapeError
from . import init
from .module import Module

__all__ = ["Bilinear", "bilinear"]


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] (+ bias[o])."""
    if input1.shape[:-1] != input2.shape[:-1]:
        raise ShapeError(f"bilinear: input1 {tuple(input1.shape)} and input2 {tuple(input2.shape)} differ in their "
                         "leading dims")
    if weight.ndim != 3 or weight.shape[1] != input1.shape[-1] or weight.shape[2] != input2.shape[-1]:
        raise ShapeError(f"bilinear: weight {tuple(weight.shape)} does not fit inputs {tuple(input1.shape)}, "
                         f"{tuple(input2.shape)}")
    lead = tuple(input1.shape[:-1])
    x1, x2 = input1.reshape(-1, input1.shape[-1]), input2.reshape(-1, input2.shape[-1])
    y = einsum("bi,oij,bj->bo", x1, weight, x2)
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, weight.shape[0])


class Bilinear(Module):
    """y = x1^T A x2 + b.

    Args:
        in1_features (int), in2_features (int): sizes of the two inputs' last dims.
        out_features (int): size of the output's last dim.
        bias (bool): learn an additive bias. Default: True.

    Weight (out_features, in1_features, in2_features) and bias are drawn from U(-1/sqrt(in1), 1/sqrt(in1)).
    """

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        bound = 1 / math.sqrt(in1_features)
        self.weight = Parameter(empty(out_features, in1_features, in2_features, device=device, dtype=dtype))
        init.uniform_(self.weight, -bound, bound)
        if bias:
            self.bias = Parameter(empty(out_features, device=device, dtype=dtype))
            init.uniform_(self.bias, -bound, bound)
        else:
            self.register_parameter("bias", None)

    def forward(self, input1, input2):
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
