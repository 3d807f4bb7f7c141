"""`ggrad.nn.utils` (PyTorch's torch.nn.utils): gradient clipping (`clip_grad`), variable-length batches for the
recurrent layers (`rnn`), the parameters as one vector (`convert_parameters`), weight normalization (`weight_norm`),
spectral normalization (`spectral_norm`), parametrizations (`parametrize`, `parametrizations`) and a forward with
other parameters (`stateless.functional_call`)."""

from . import clip_grad, convert_parameters, parametrize, rnn, stateless
from . import parametrizations
from .clip_grad import clip_grad_norm_, clip_grad_value_
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm

__all__ = ["clip_grad", "convert_parameters", "rnn", "stateless", "parametrize", "parametrizations", "clip_grad_norm_", "clip_grad_value_", "parameters_to_vector",
           "vector_to_parameters", "weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm"]
