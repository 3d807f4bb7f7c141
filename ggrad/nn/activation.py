"""Activation layers: ReLU, GELU, SiLU, Tanh, Sigmoid, LeakyReLU, ELU, Softplus, Softmax, LogSoftmax, and
SELU, CELU, Mish, Hardswish, Hardsigmoid, Hardtanh, ReLU6, LogSigmoid, GLU, PReLU, Softsign, Tanhshrink, Threshold,
Hardshrink, Softshrink, Softmin.

`inplace=True` (where PyTorch takes it) makes the input Tensor itself take the result, as in PyTorch
(see ggrad.nn.inplace: the Tensor is rebound to the new value and its history).
"""

from ..autograd import Parameter
from ..autograd.factory import full
from . import functional as F
from .module import Module


class ReLU(Module):
    """Rectified linear unit.

    y = max(x, 0)

    Args:
        inplace (bool, default False): the input takes the result.
    """

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, x):
        return F.relu(x, self.inplace)

    def extra_repr(self):
        return _inplace_repr(self.inplace)


class GELU(Module):
    """Gaussian error linear unit.

    y = x * Phi(x) (approximate='none'), or
    y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (approximate='tanh')

    Args:
        approximate (str, default 'none'): 'none' (exact, erf) or 'tanh'.
    """

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """Sigmoid linear unit (swish).

    y = x * sigmoid(x)

    Args:
        inplace (bool, default False): the input takes the result.
    """

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, x):
        return F.silu(x, self.inplace)

    def extra_repr(self):
        return _inplace_repr(self.inplace)


class Tanh(Module):
    """Hyperbolic tangent.

    y = tanh(x)
    """

    def forward(self, x):
        return F.tanh(x)


class Sigmoid(Module):
    """Logistic sigmoid.

    y = 1 / (1 + exp(-x))
    """

    def forward(self, x):
        return F.sigmoid(x)


class LeakyReLU(Module):
    """Leaky rectified linear unit.

    y = x if x >= 0 else negative_slope * x

    Args:
        negative_slope (float, default 0.01): slope for negative inputs.
        inplace (bool, default False): the input takes the result.
    """

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + _inplace_repr(self.inplace, ", ")


class ELU(Module):
    """Exponential linear unit.

    y = x if x > 0 else alpha * (exp(x) - 1)

    Args:
        alpha (float, default 1.0): scale of the negative part.
        inplace (bool, default False): the input takes the result.
    """

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x):
        return F.elu(x, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + _inplace_repr(self.inplace, ", ")


class Softplus(Module):
    """Smooth approximation of ReLU.

    y = log(1 + exp(beta x)) / beta, or x where beta x > threshold

    Args:
        beta (float, default 1.0): sharpness.
        threshold (float, default 20.0): above it (in beta x) the layer is linear.
    """

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        return F.softplus(x, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Softmax2d(Module):
    """Softmax over the channels of each position: dim -3 of a (N, C, H, W) or (C, H, W) input."""

    def forward(self, x):
        if x.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {x.ndim}D instead")
        return F.softmax(x, -3)


class Softmax(Module):
    """Softmax along one dimension.

    y_i = exp(x_i) / sum_j exp(x_j)

    Args:
        dim (int, default -1): the dimension normalised to sum to 1.
    """

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.softmax(x, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Log of the softmax along one dimension, computed stably.

    y_i = x_i - log(sum_j exp(x_j))

    Args:
        dim (int, default -1): the dimension normalised.
    """

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.log_softmax(x, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


def _inplace_repr(inplace, separator=""):
    return separator + "inplace=True" if inplace else ""


def _stateless(name, fn, formula, takes_inplace=True):
    """A layer with no arguments but PyTorch's `inplace` (where it takes one): y = fn(x)."""
    if takes_inplace:
        def __init__(self, inplace=False):
            Module.__init__(self)
            self.inplace = inplace

        def forward(self, x):
            return fn(x, self.inplace)

        def extra_repr(self):
            return _inplace_repr(self.inplace)
        args = "\n\n    Args:\n        inplace (bool, default False): the input takes the result.\n    "
        members = {"__init__": __init__, "forward": forward, "extra_repr": extra_repr}
    else:
        def forward(self, x):
            return fn(x)
        args = "\n    "
        members = {"forward": forward}
    members.update({"__doc__": f"{name}.\n\n    {formula}{args}", "__module__": __name__})
    return type(name, (Module,), members)


SELU = _stateless("SELU", F.selu, "y = 1.0507 * (x if x > 0 else 1.6733 (exp(x) - 1))")
Mish = _stateless("Mish", F.mish, "y = x tanh(softplus(x))")
Hardswish = _stateless("Hardswish", F.hardswish, "y = x clamp(x + 3, 0, 6) / 6")
Hardsigmoid = _stateless("Hardsigmoid", F.hardsigmoid, "y = clamp(x + 3, 0, 6) / 6")
ReLU6 = _stateless("ReLU6", F.relu6, "y = clamp(x, 0, 6)")
LogSigmoid = _stateless("LogSigmoid", F.logsigmoid, "y = log(sigmoid(x))", takes_inplace=False)
Softsign = _stateless("Softsign", F.softsign, "y = x / (1 + |x|)", takes_inplace=False)
Tanhshrink = _stateless("Tanhshrink", F.tanhshrink, "y = x - tanh(x)", takes_inplace=False)


class Hardshrink(Module):
    """Zero inside [-lambd, lambd].

    y = x if |x| > lambd else 0

    Args:
        lambd (float, default 0.5): the half-width of the zeroed band.
    """

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, x):
        return F.hardshrink(x, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Softshrink(Hardshrink):
    """Shrink towards zero by lambd, zero inside [-lambd, lambd].

    y = x - lambd sign(x) if |x| > lambd else 0

    Args:
        lambd (float, default 0.5): the amount of shrinkage.
    """

    def forward(self, x):
        return F.softshrink(x, self.lambd)


class Softmin(Module):
    """Softmax of the negated input along one dimension.

    y_i = exp(-x_i) / sum_j exp(-x_j)

    Args:
        dim (int): the dimension normalised to sum to 1.
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.softmin(x, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Threshold(Module):
    """Replaces the values at or below a threshold.

    y = x if x > threshold else value

    Args:
        threshold (float): the threshold.
        value (float): what replaces x at or below it.
        inplace (bool, default False): the input takes the result.
    """

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, x):
        return F.threshold(x, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}" + _inplace_repr(self.inplace, ", ")


class CELU(Module):
    """Continuously differentiable ELU.

    y = max(0, x) + min(0, alpha (exp(x / alpha) - 1))

    Args:
        alpha (float, default 1.0): scale of the negative part.
        inplace (bool, default False): the input takes the result.
    """

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x):
        return F.celu(x, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + _inplace_repr(self.inplace, ", ")


class Hardtanh(Module):
    """Clamp to [min_val, max_val] (gradient 1 strictly inside).

    y = clamp(x, min_val, max_val)

    Args:
        min_val (float, default -1.0): lower bound.
        max_val (float, default 1.0): upper bound.
        inplace (bool, default False): the input takes the result.
    """

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, x):
        return F.hardtanh(x, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + _inplace_repr(self.inplace, ", ")


class GLU(Module):
    """Gated linear unit: the first half of x times the sigmoid of the second, along `dim`.

    y = a * sigmoid(b), (a, b) = x.chunk(2, dim)

    Args:
        dim (int, default -1): the dimension halved.
    """

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.glu(x, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class PReLU(Module):
    """Leaky ReLU with a learned slope (one, or one per channel along dim 1).

    y = x if x > 0 else weight * x

    Args:
        num_parameters (int, default 1): 1 or the number of channels.
        init (float, default 0.25): the slope's initial value.
    """

    def __init__(self, num_parameters=1, init=0.25):
        super().__init__()
        self.num_parameters = num_parameters
        self.weight = Parameter(full((num_parameters,), float(init)))

    def forward(self, x):
        return F.prelu(x, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"
