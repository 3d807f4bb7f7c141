"""Multi-layer recurrent networks over sequences: `RNN`, `LSTM`, `GRU`, as PyTorch's.

Each layer and direction projects the inputs of every time step in ONE matmul (T*B rows against
weight_ih), then a Python time loop records one recurrent step per time step (a matmul with
weight_hh and the gate arithmetic); the whole sequence, backward included, computes as one graph.
A PackedSequence input (variable lengths) runs padded, sorted by length: at the steps past a sequence's
end a 0/1 mask keeps its state, so each sequence's final state is the one at its last real step (the
reverse direction starts there), and the output is packed again, as torch returns it.
"""

import warnings

import numpy as np

from ..autograd import Parameter
from ..autograd.factory import empty, tensor, zeros
from ..autograd.ops import cat, stack
from ..ggml.errors import ShapeError
from . import functional as F
from .module import Module
from .utils.rnn import PackedSequence, pack_padded_sequence, packed_lengths, pad_packed_sequence
from .rnn_cells import NONLINEARITIES, check_sizes, elman_step, gru_step, init_recurrent_, lstm_step


class RNNBase(Module):
    """What RNN, LSTM and GRU share: PyTorch's parameters (weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k},
    bias_hh_l{k}, with the suffix _reverse for the backward direction, weight_hr_l{k} with an LSTM
    projection), their init, the input and state checks, layers, directions and dropout."""

    gates = 1

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        layer = type(self).__name__
        check_sizes(layer, input_size=input_size, hidden_size=hidden_size, num_layers=num_layers)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             f"element being zeroed, got {dropout!r}")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers=1")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        directions = 2 if bidirectional else 1
        out = proj_size or hidden_size
        g = self.gates * hidden_size
        for k in range(num_layers):
            width = input_size if k == 0 else out * directions
            for suffix in ("", "_reverse")[:directions]:
                self._new(f"weight_ih_l{k}{suffix}", (g, width), device, dtype)
                self._new(f"weight_hh_l{k}{suffix}", (g, out), device, dtype)
                if bias:
                    self._new(f"bias_ih_l{k}{suffix}", (g,), device, dtype)
                    self._new(f"bias_hh_l{k}{suffix}", (g,), device, dtype)
                if proj_size:
                    self._new(f"weight_hr_l{k}{suffix}", (proj_size, hidden_size), device, dtype)
        self.reset_parameters()

    def _new(self, name, shape, device, dtype):
        setattr(self, name, Parameter(empty(shape, dtype=dtype, device=device)))

    def reset_parameters(self):
        init_recurrent_(self, self.hidden_size)

    def flatten_parameters(self):
        """PyTorch packs the weights for cuDNN here; ggrad's weights need no packing, so this does nothing."""

    # ---- forward ---------------------------------------------------------------------------------
    def _weights(self, k, suffix):
        get = self._parameters.get
        return (get(f"weight_ih_l{k}{suffix}"), get(f"weight_hh_l{k}{suffix}"), get(f"bias_ih_l{k}{suffix}"),
                get(f"bias_hh_l{k}{suffix}"), get(f"weight_hr_l{k}{suffix}"))

    def _sequence(self, input):
        """input as (T, B, in), and whether it was unbatched."""
        layer = type(self).__name__
        if input.ndim not in (2, 3):
            raise ShapeError(f"{layer}: Expected input to be 2D or 3D, got {input.ndim}D tensor of shape "
                             f"{tuple(input.shape)}")
        if input.shape[-1] != self.input_size:
            raise ShapeError(f"{layer}: input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                             f"got {input.shape[-1]}")
        if input.ndim == 2:
            return input.unsqueeze(1), True
        return (input.transpose(0, 1) if self.batch_first else input), False

    def _initial(self, state, x, unbatched, width, name):
        """An initial state as (L*D, B, width): zeros when omitted, else checked against PyTorch's shape."""
        n = self.num_layers * (2 if self.bidirectional else 1)
        if state is None:
            return zeros(n, x.shape[1], width, dtype=x.dtype, device=x.device)
        want = (n, width) if unbatched else (n, x.shape[1], width)
        if tuple(state.shape) != want:
            raise ShapeError(f"{type(self).__name__}: Expected {name} size {want}, got {tuple(state.shape)}")
        return state.unsqueeze(1) if unbatched else state

    def _run(self, x, states, masks=None):
        """Run every layer and direction over x (T, B, in); `states` is a list of per-state tensors
        (L*D, B, .); returns the last layer's outputs (T, B, D*out) and the final states, stacked."""
        directions = 2 if self.bidirectional else 1
        finals = [[] for _ in states]
        for k in range(self.num_layers):
            if k and self.dropout:
                x = F.dropout(x, self.dropout, self.training)
            outputs = []
            for d, suffix in enumerate(("", "_reverse")[:directions]):
                start = [s[k * directions + d] for s in states]
                seq, last = self._direction(x, start, self._weights(k, suffix), d == 1, masks)
                outputs.append(seq)
                for f, value in zip(finals, last):
                    f.append(value)
            x = outputs[0] if directions == 1 else cat(outputs, -1)
        return x, [stack(f, 0) for f in finals]

    def _direction(self, x, state, weights, reverse, masks=None):
        """One layer in one direction: the outputs (T, B, out) and the final state (a list); masks[t]
        (B, 1) is 1 where step t is real and 0 where the state is carried over unchanged."""
        w_ih, w_hh, b_ih, b_hh, w_hr = weights
        t, b = x.shape[0], x.shape[1]
        gx = F.linear(x.reshape(t * b, x.shape[2]), w_ih, self._input_bias(b_ih, b_hh))
        steps = [g.reshape(b, g.shape[-1]) for g in gx.split(b, 0)]   # views; backward is one concat
        outs = [None] * t
        for step in (range(t - 1, -1, -1) if reverse else range(t)):
            new = self._step(steps[step], state, w_hh, b_hh, w_hr)
            if masks is not None:
                keep = masks[step]
                new = [n * keep + o * (1.0 - keep) for n, o in zip(new, state)]
            state = new
            outs[step] = state[0]
        return stack(outs, 0), state

    def _input_bias(self, b_ih, b_hh):
        """The biases added to the input projection up front (both, except in a GRU)."""
        return None if b_ih is None else b_ih + b_hh

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        x, unbatched = self._sequence(input)
        states = self._initial_states(hx, x, unbatched)
        out, finals = self._run(x, states)
        if unbatched:
            out, finals = out.squeeze(1), [f.squeeze(1) for f in finals]
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, self._pack(finals)

    def _forward_packed(self, packed, hx):
        """A PackedSequence in, one out (same batch sizes and order); the final states in the batch's
        original order, as torch."""
        lengths = packed_lengths(packed)
        x, _ = pad_packed_sequence(PackedSequence(packed.data, packed.batch_sizes))   # (T, B, in), sorted
        self._sequence(x)   # the size checks
        order, unorder = packed.sorted_indices, packed.unsorted_indices
        if hx is not None and order is not None:
            hx = tuple(h.index_select(1, order) for h in hx) if isinstance(hx, tuple) else hx.index_select(1, order)
        states = self._initial_states(hx, x, False)
        masks = [tensor((lengths > t).astype(np.float32).reshape(-1, 1), dtype=x.dtype, device=x.device)
                 for t in range(x.shape[0])]
        out, finals = self._run(x, states, masks)
        if unorder is not None:
            finals = [f.index_select(1, unorder) for f in finals]
        data = pack_padded_sequence(out, lengths).data
        return PackedSequence(data, packed.batch_sizes, order, unorder), self._pack(finals)

    def _initial_states(self, hx, x, unbatched):
        return [self._initial(hx, x, unbatched, self.hidden_size, "hidden")]

    def _pack(self, finals):
        return finals[0]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


_SHAPES = """
    Shape: input (T, B, in), (B, T, in) when batch_first, or (T, in) unbatched; states (num_layers * D, B, H)
    (D = 2 if bidirectional else 1; zeros when omitted; batch_first does not apply to them). The output is
    (T, B, D * H) (batch first when batch_first): the last layer's h at every step, both directions
    concatenated.
    Init: every weight and bias ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as PyTorch.
    Not supported: PackedSequence inputs (pad the batch instead)."""


class RNN(RNNBase):
    """Multi-layer Elman RNN, as PyTorch's `nn.RNN`.

    h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), act tanh or relu

    Args:
        input_size (int): features of x.
        hidden_size (int): features of h.
        num_layers (int, default 1): stacked layers, each reading the outputs of the one before.
        nonlinearity (str, default 'tanh'): 'tanh' or 'relu'.
        bias (bool, default True): learn bias_ih and bias_hh.
        batch_first (bool, default False): input and output are (B, T, feature).
        dropout (float, default 0.0): dropout on the outputs of every layer but the last (training only).
        bidirectional (bool, default False): also run each layer backwards in time.
        device, dtype (optional): where the parameters live and their dtype.

    forward(input, hx=None) -> (output, h_n).
    """ + _SHAPES

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in NONLINEARITIES:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)

    def _step(self, gx, state, w_hh, b_hh, w_hr):
        return [elman_step(gx, state[0], w_hh, NONLINEARITIES[self.nonlinearity])]

    def extra_repr(self):
        s = super().extra_repr()
        return s if self.nonlinearity == "tanh" else s + f", nonlinearity={self.nonlinearity!r}"


class LSTM(RNNBase):
    """Multi-layer long short-term memory, as PyTorch's `nn.LSTM`.

    i, f, g, o = split(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh);  c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g);
    h_t = sigmoid(o) tanh(c_t)   (times W_hr^T when proj_size > 0)

    Args:
        input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, device, dtype: as RNN.
        proj_size (int, default 0): if > 0, h is projected to this width (weight_hr_l{k}, (proj_size, H)).

    forward(input, hx=None) with hx = (h_0, c_0) -> (output, (h_n, c_n)); h has width proj_size or H, c H.
    """ + _SHAPES

    gates = 4

    def _initial_states(self, hx, x, unbatched):
        h, c = (None, None) if hx is None else hx
        return [self._initial(h, x, unbatched, self.proj_size or self.hidden_size, "hidden[0]"),
                self._initial(c, x, unbatched, self.hidden_size, "hidden[1]")]

    def _step(self, gx, state, w_hh, b_hh, w_hr):
        return list(lstm_step(gx, state[0], state[1], w_hh, w_hr))

    def _pack(self, finals):
        return tuple(finals)


class GRU(RNNBase):
    """Multi-layer gated recurrent unit, as PyTorch's `nn.GRU`.

    r = sigmoid(x W_ir^T + b_ir + h W_hr^T + b_hr), z likewise, n = tanh(x W_in^T + b_in + r (h W_hn^T + b_hn)),
    h_t = (1 - z) n + z h_{t-1}

    Args:
        input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, device, dtype: as RNN.

    forward(input, hx=None) -> (output, h_n).
    """ + _SHAPES

    gates = 3

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)

    def _input_bias(self, b_ih, b_hh):
        return b_ih

    def _step(self, gx, state, w_hh, b_hh, w_hr):
        return [gru_step(gx, state[0], w_hh, b_hh)]
