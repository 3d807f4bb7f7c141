"""The activations and dropout of `ggrad.nn.functional` with PyTorch's `inplace=` argument, the in-place
forms F.relu_, F.elu_, F.leaky_relu_, F.hardtanh_, F.celu_, F.selu_, F.threshold_, and F.threshold.

With inplace=True the input Tensor itself takes the result and is returned, as in PyTorch: as the
Tensor's in-place methods (x.relu_()), the op reads the input's old value and the Tensor is then
rebound to the result and its autograd history (ggrad.autograd.methods), so every later read of the
input sees the activation and gradients flow through it. Like PyTorch, an in-place op on a leaf that
requires grad raises RuntimeError.
"""

from ..autograd import ops
from ..autograd.methods import _inplace
from ..autograd.arguments import NUMBER, kinds


def _apply(fn, name, input, inplace, *args):  # noqa: A002
    """fn(input, *args); with inplace, written into input as Tensor.relu_ is (the op reads input's old value)."""
    return _inplace(fn, name + "_")(input, *args) if inplace else fn(input, *args)


def relu(input, inplace=False):  # noqa: A002 (PyTorch's names)
    """max(x, 0)."""
    return _apply(ops.relu, "relu", input, inplace)


def relu6(input, inplace=False):  # noqa: A002
    """clamp(x, 0, 6)."""
    return _apply(ops.relu6, "relu6", input, inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):  # noqa: A002
    """x if x >= 0 else negative_slope * x."""
    return _apply(ops.leaky_relu, "leaky_relu", input, inplace, negative_slope)


def elu(input, alpha=1.0, inplace=False):  # noqa: A002
    """x if x > 0 else alpha (exp(x) - 1)."""
    return _apply(ops.elu, "elu", input, inplace, alpha)


def selu(input, inplace=False):  # noqa: A002
    """scale * elu(x, alpha) with the self-normalising constants."""
    return _apply(ops.selu, "selu", input, inplace)


def celu(input, alpha=1.0, inplace=False):  # noqa: A002
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1))."""
    return _apply(ops.celu, "celu", input, inplace, alpha)


def silu(input, inplace=False):  # noqa: A002
    """x * sigmoid(x)."""
    return _apply(ops.silu, "silu", input, inplace)


def mish(input, inplace=False):  # noqa: A002
    """x * tanh(softplus(x))."""
    return _apply(ops.mish, "mish", input, inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):  # noqa: A002
    """clamp(x, min_val, max_val), gradient 1 strictly inside."""
    return _apply(ops.hardtanh, "hardtanh", input, inplace, min_val, max_val)


def hardsigmoid(input, inplace=False):  # noqa: A002
    """clamp(x + 3, 0, 6) / 6."""
    return _apply(ops.hardsigmoid, "hardsigmoid", input, inplace)


def hardswish(input, inplace=False):  # noqa: A002
    """x * clamp(x + 3, 0, 6) / 6."""
    return _apply(ops.hardswish, "hardswish", input, inplace)


@kinds(value=NUMBER)
def threshold(input, threshold, value, inplace=False):  # noqa: A002
    """x where x > threshold, else `value` (gradient 1 where x > threshold, 0 elsewhere)."""
    return _apply(_threshold, "threshold", input, inplace, threshold, value)


def _threshold(input, threshold, value):  # noqa: A002
    return input.masked_fill(input <= threshold, value)


def dropout(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """Zero each element with probability p and scale the rest by 1 / (1 - p) (training only)."""
    if not training:
        return ops.dropout(input, p, False)   # the input itself: nothing is written
    return _apply(ops.dropout, "dropout", input, inplace, p, training)


def relu_(input):  # noqa: A002
    return relu(input, inplace=True)


def elu_(input, alpha=1.0):  # noqa: A002
    return elu(input, alpha, inplace=True)


def leaky_relu_(input, negative_slope=0.01):  # noqa: A002
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):  # noqa: A002
    return hardtanh(input, min_val, max_val, inplace=True)


def celu_(input, alpha=1.0):  # noqa: A002
    return celu(input, alpha, inplace=True)


def selu_(input):  # noqa: A002
    return selu(input, inplace=True)


@kinds(value=NUMBER)
def threshold_(input, threshold_value, value):  # noqa: A002
    return threshold(input, threshold_value, value, inplace=True)


NAMES = ["relu", "relu6", "leaky_relu", "elu", "selu", "celu", "silu", "mish", "hardtanh", "hardsigmoid",
         "hardswish", "threshold", "dropout", "relu_", "elu_", "leaky_relu_", "hardtanh_", "celu_", "selu_",
         "threshold_"]
