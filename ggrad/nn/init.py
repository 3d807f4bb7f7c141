"""Parameter initialisation, as `torch.nn.init`: uniform, normal, constant, Xavier/Glorot, Kaiming/He,
orthogonal.

Values are drawn on the host from ggrad's seeded generator (`ggrad.manual_seed`), so initialisation is
reproducible on every backend, then copied into the tensor (no gradient is recorded). Every function
returns the tensor it filled.
"""

import math

import numpy as np

from ..autograd import no_grad
from ..autograd.factory import generator, tensor as _tensor


def _fill(t, values):
    """Copy host `values` into `t`, in place (the Tensor object is kept)."""
    with no_grad():
        t.copy_(_tensor(np.asarray(values, dtype=np.float32).reshape(t.shape), device=t.device))
    return t


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table).

    Args:
        nonlinearity (str): 'linear', 'conv1d', 'conv2d', 'sigmoid', 'tanh', 'relu', 'leaky_relu', 'selu'.
        param (float, optional): negative slope of leaky_relu (default 0.01).
    """
    linear_fns = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d")
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise ValueError(f"negative_slope {slope} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(t):
    if t.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions "
                         f"(got shape {t.shape})")
    receptive = 1
    for s in t.shape[2:]:
        receptive *= s
    return t.shape[1] * receptive, t.shape[0] * receptive


def _fan(t, mode):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(t, a=0.0, b=1.0):
    """Fill with U(a, b)."""
    if a > b:
        raise ValueError(f"uniform_: expected a <= b, got a={a}, b={b}")
    return _fill(t, generator().uniform(a, b, size=t.shape))


def normal_(t, mean=0.0, std=1.0):
    """Fill with N(mean, std^2)."""
    if std < 0:
        raise ValueError(f"normal_: std must be non-negative, got {std}")
    return _fill(t, generator().normal(mean, std, size=t.shape))


def trunc_normal_(t, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """Fill with N(mean, std^2) truncated to [a, b] (rejected draws are redrawn)."""
    if not a < b:
        raise ValueError(f"trunc_normal_: expected a < b, got a={a}, b={b}")
    gen = generator()
    values = gen.normal(mean, std, size=t.shape)
    bad = (values < a) | (values > b)
    for _ in range(100):
        if not bad.any():
            break
        values[bad] = gen.normal(mean, std, size=int(bad.sum()))
        bad = (values < a) | (values > b)
    return _fill(t, np.clip(values, a, b))


def constant_(t, val):
    """Fill with the constant `val`."""
    return _fill(t, np.full(t.shape, val, dtype=np.float64))


def ones_(t):
    return constant_(t, 1.0)


def zeros_(t):
    return constant_(t, 0.0)


def eye_(t):
    """Fill a 2-D tensor with the identity matrix."""
    if t.ndim != 2:
        raise ValueError(f"eye_: only tensors with 2 dimensions are supported, got shape {t.shape}")
    return _fill(t, np.eye(*t.shape))


def xavier_uniform_(t, gain=1.0):
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(t, -bound, bound)


def xavier_normal_(t, gain=1.0):
    """Glorot normal: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def kaiming_uniform_(t, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    """He uniform: U(-bound, bound) with bound = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a)."""
    fan = _fan(t, mode)
    if fan == 0:
        return t
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan)
    return uniform_(t, -bound, bound)


def kaiming_normal_(t, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    """He normal: N(0, std^2) with std = gain / sqrt(fan)."""
    fan = _fan(t, mode)
    if fan == 0:
        return t
    return normal_(t, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan))


def orthogonal_(t, gain=1.0):
    """A (semi-)orthogonal matrix times `gain`, as PyTorch's: Q of the QR decomposition of a normal draw of
    shape (rows, cols) = (t.shape[0], prod(t.shape[1:])) (transposed when rows < cols), signs fixed by R's
    diagonal so the result is uniformly distributed."""
    if t.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    rows = t.shape[0]
    cols = t.numel() // rows if rows else 0
    if t.numel() == 0:
        return t
    draw = generator().normal(0.0, 1.0, size=(rows, cols))
    if rows < cols:
        draw = draw.T
    q, r = np.linalg.qr(draw)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(t, gain * q)
