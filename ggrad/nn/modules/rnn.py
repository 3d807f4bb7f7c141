"""PyTorch's `torch.nn.modules.rnn` path: the recurrent layers and cells."""

from ..rnn import RNN, LSTM, GRU
from ..rnn_cells import RNNCell, LSTMCell, GRUCell

__all__ = ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"]
