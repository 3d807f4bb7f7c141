"""Activation layers: ReLU, GELU, SiLU, Tanh, Sigmoid, LeakyReLU, ELU, Softplus, Softmax, LogSoftmax.

`inplace=` is accepted for PyTorch compatibility and ignored: ggrad never overwrites an input.
"""

from . import functional as F
from .module import Module


class ReLU(Module):
    """Rectified linear unit.

    y = max(x, 0)

    Args:
        inplace (bool, default False): accepted and ignored.
    """

    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, x):
        return F.relu(x)


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
        inplace (bool, default False): accepted and ignored.
    """

    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, x):
        return F.silu(x)


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
        inplace (bool, default False): accepted and ignored.
    """

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"


class ELU(Module):
    """Exponential linear unit.

    y = x if x > 0 else alpha * (exp(x) - 1)

    Args:
        alpha (float, default 1.0): scale of the negative part.
        inplace (bool, default False): accepted and ignored.
    """

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return F.elu(x, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}"


class Softplus(Module):
    """Smooth approximation of ReLU.

    y = log(1 + exp(x))
    """

    def forward(self, x):
        return F.softplus(x)


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
