"""`ggrad.nn.utils` (PyTorch's torch.nn.utils): gradient clipping (`clip_grad`) and variable-length batches
for the recurrent layers (`rnn`)."""

from . import clip_grad, rnn
from .clip_grad import clip_grad_norm_, clip_grad_value_

__all__ = ["clip_grad", "rnn", "clip_grad_norm_", "clip_grad_value_"]
