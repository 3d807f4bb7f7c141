"""`parameters_to_vector` and `vector_to_parameters` (PyTorch's torch.nn.utils.convert_parameters): the
parameters as one flat vector and back, as natural-gradient and evolution-strategy code uses them."""

from ...autograd import Tensor, no_grad
from ...autograd.ops import cat

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters):
    """The parameters flattened and joined into one vector (differentiable, on their device)."""
    parameters = list(parameters)
    _one_device(parameters)
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Overwrite each parameter, in order, with the next `numel()` entries of the vector `vec` (no gradient)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    parameters = list(parameters)
    _one_device(parameters)
    pointer = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[pointer:pointer + n].reshape(p.shape))
            pointer += n


def _one_device(parameters):
    devices = {p.device for p in parameters}
    if len(devices) > 1:
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
