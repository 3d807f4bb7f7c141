"""PyTorch's `torch.nn.modules.activation` path: the activation modules (MultiheadAttention lives here in PyTorch)."""

from ..activation import (Threshold, ReLU, Hardtanh, ReLU6, Sigmoid, Hardsigmoid, Tanh, SiLU, Mish, Hardswish, ELU,
                          CELU, SELU, GLU, GELU, Hardshrink, LeakyReLU, LogSigmoid, Softplus, Softshrink, PReLU,
                          Softsign, Tanhshrink, Softmin, Softmax, LogSoftmax, Softmax2d)
from ..rrelu import RReLU
from ..attention import MultiheadAttention

__all__ = ["Threshold", "ReLU", "RReLU", "Hardtanh", "ReLU6", "Sigmoid", "Hardsigmoid", "Tanh", "SiLU", "Mish",
           "Hardswish", "ELU", "CELU", "SELU", "GLU", "GELU", "Hardshrink", "LeakyReLU", "LogSigmoid", "Softplus",
           "Softshrink", "MultiheadAttention", "PReLU", "Softsign", "Tanhshrink", "Softmin", "Softmax", "LogSoftmax", "Softmax2d"]
