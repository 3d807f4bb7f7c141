"""The recurrent steps (Elman, LSTM, GRU) and the single-step layers `RNNCell`, `LSTMCell`, `GRUCell`.

A step takes the input's projection `gx` (x W_ih^T plus the biases that can be added up front) and
the previous state, and returns the next state. `ggrad.nn.rnn` runs the same steps over a sequence,
with the input projection of every time step computed in one matmul before the time loop.
"""

import math

from ..autograd import Parameter
from ..autograd.factory import empty, zeros
from ..ggml.errors import ShapeError
from . import functional as F
from . import init
from .module import Module

NONLINEARITIES = {"tanh": F.tanh, "relu": F.relu}


# ---- the steps ------------------------------------------------------------------------------------
def elman_step(gx, h, w_hh, act):
    """h' = act(gx + h W_hh^T), gx = x W_ih^T + b_ih + b_hh."""
    return act(gx + F.linear(h, w_hh))


def lstm_step(gx, h, c, w_hh, w_hr=None):
    """(h', c') of an LSTM: gates i, f, g, o from gx + h W_hh^T (gx holds b_ih + b_hh);
    c' = f c + i g, h' = o tanh(c') (times W_hr^T with a projection). One sigmoid covers every gate
    (g's share is unused): fewer nodes per time step."""
    gates = gx + F.linear(h, w_hh)
    i, f, _, o = F.sigmoid(gates).chunk(4, -1)
    g = F.tanh(gates.narrow(-1, 2 * c.shape[-1], c.shape[-1]))
    c = f * c + i * g
    h = o * F.tanh(c)
    return (h if w_hr is None else F.linear(h, w_hr)), c


def gru_step(gx, h, w_hh, b_hh):
    """h' of a GRU: r, z = sigmoid(gx_rz + (h W_hh^T + b_hh)_rz), n = tanh(gx_n + r (h W_hn^T + b_hn)),
    h' = (1 - z) n + z h; gx = x W_ih^T + b_ih (b_hn must stay inside r's product)."""
    gh = F.linear(h, w_hh, b_hh)
    x_rz, x_n = gx.split([2 * h.shape[-1], h.shape[-1]], -1)
    h_rz, h_n = gh.split([2 * h.shape[-1], h.shape[-1]], -1)
    r, z = F.sigmoid(x_rz + h_rz).chunk(2, -1)
    n = F.tanh(x_n + r * h_n)
    return n + z * (h - n)


def init_recurrent_(module, hidden_size):
    """PyTorch's init of every recurrent weight and bias: U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
    bound = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0.0
    for p in module.parameters():
        init.uniform_(p, -bound, bound)


def check_sizes(layer, **sizes):
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{layer}: {name} must be a positive integer, got {value!r}")


# ---- the cells ------------------------------------------------------------------------------------
class _CellBase(Module):
    """Parameters weight_ih (G*H, in), weight_hh (G*H, H), bias_ih, bias_hh (G*H), G gates per unit."""

    gates = 1

    def __init__(self, input_size, hidden_size, bias, device, dtype):
        super().__init__()
        check_sizes(type(self).__name__, input_size=input_size, hidden_size=hidden_size)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        g = self.gates * hidden_size
        self.weight_ih = Parameter(empty(g, input_size, dtype=dtype, device=device))
        self.weight_hh = Parameter(empty(g, hidden_size, dtype=dtype, device=device))
        if bias:
            self.bias_ih = Parameter(empty(g, dtype=dtype, device=device))
            self.bias_hh = Parameter(empty(g, dtype=dtype, device=device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        init_recurrent_(self, self.hidden_size)

    def _input(self, x):
        """x as (B, in), and whether it was unbatched."""
        if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
            raise ShapeError(f"{type(self).__name__}: expected input of shape (batch, {self.input_size}) or "
                             f"({self.input_size},), got {tuple(x.shape)}")
        return (x.unsqueeze(0), True) if x.ndim == 1 else (x, False)

    def _state(self, state, x, unbatched, name):
        if state is None:
            return zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)
        want = (self.hidden_size,) if unbatched else (x.shape[0], self.hidden_size)
        if tuple(state.shape) != want:
            raise ShapeError(f"{type(self).__name__}: expected {name} of shape {want}, got {tuple(state.shape)}")
        return state.unsqueeze(0) if unbatched else state

    def _projection(self, x, with_hh_bias):
        bias = self.bias_ih
        if bias is not None and with_hh_bias:
            bias = bias + self.bias_hh
        return F.linear(x, self.weight_ih, bias)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        return s if self.bias else s + ", bias=False"


class RNNCell(_CellBase):
    """One step of an Elman RNN, as PyTorch's `nn.RNNCell`.

    h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh), act tanh or relu

    Args:
        input_size (int): features of x.
        hidden_size (int): features of h.
        bias (bool, default True): learn bias_ih and bias_hh.
        nonlinearity (str, default 'tanh'): 'tanh' or 'relu'.
        device, dtype (optional): where the parameters live and their dtype.

    Shape: x (B, in) or (in,), hx (B, H) or (H,) (zeros when omitted) -> h' of hx's shape.
    Init: every weight and bias ~ U(-1/sqrt(H), 1/sqrt(H)), as PyTorch.
    """

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in NONLINEARITIES:
            raise ValueError(f"Unknown nonlinearity: {nonlinearity!r} (expected 'tanh' or 'relu')")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):
        x, unbatched = self._input(input)
        h = self._state(hx, x, unbatched, "hx")
        h = elman_step(self._projection(x, True), h, self.weight_hh, NONLINEARITIES[self.nonlinearity])
        return h.squeeze(0) if unbatched else h

    def extra_repr(self):
        s = super().extra_repr()
        return s if self.nonlinearity == "tanh" else s + f", nonlinearity={self.nonlinearity!r}"


class LSTMCell(_CellBase):
    """One step of an LSTM, as PyTorch's `nn.LSTMCell`.

    i, f, g, o = split(x W_ih^T + b_ih + h W_hh^T + b_hh);  c' = sigmoid(f) c + sigmoid(i) tanh(g);
    h' = sigmoid(o) tanh(c')

    Args:
        input_size (int), hidden_size (int), bias (bool, default True), device, dtype: as RNNCell.

    Shape: x (B, in) or (in,), hx = (h, c) each (B, H) or (H,) (zeros when omitted) -> (h', c').
    Parameters: weight_ih (4H, in), weight_hh (4H, H), bias_ih and bias_hh (4H), gates in the order i, f, g, o.
    """

    gates = 4

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):
        x, unbatched = self._input(input)
        h, c = (None, None) if hx is None else hx
        h = self._state(h, x, unbatched, "hx[0]")
        c = self._state(c, x, unbatched, "hx[1]")
        h, c = lstm_step(self._projection(x, True), h, c, self.weight_hh)
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


class GRUCell(_CellBase):
    """One step of a GRU, as PyTorch's `nn.GRUCell`.

    r = sigmoid(x W_ir^T + b_ir + h W_hr^T + b_hr), z likewise, n = tanh(x W_in^T + b_in + r (h W_hn^T + b_hn)),
    h' = (1 - z) n + z h

    Args:
        input_size (int), hidden_size (int), bias (bool, default True), device, dtype: as RNNCell.

    Shape: x (B, in) or (in,), hx (B, H) or (H,) (zeros when omitted) -> h'.
    Parameters: weight_ih (3H, in), weight_hh (3H, H), bias_ih and bias_hh (3H), gates in the order r, z, n.
    """

    gates = 3

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):
        x, unbatched = self._input(input)
        h = self._state(hx, x, unbatched, "hx")
        h = gru_step(self._projection(x, False), h, self.weight_hh, self.bias_hh)
        return h.squeeze(0) if unbatched else h
