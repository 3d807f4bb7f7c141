"""`isin`: which elements of a tensor occur in another (PyTorch's torch.isin), compared on the device."""

from ..factory import tensor
from ..tensor import Tensor
from . import logical
from ..declaration import declare


@declare()
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """A bool tensor of `elements`' shape: True where the element equals one of `test_elements` (False with
    `invert`). Either argument may be a number, not both; `assume_unique` changes nothing here. Every element
    is compared with every test element at once: memory grows as their product."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin(): elements or test_elements must be a Tensor")
    if not isinstance(elements, Tensor):
        elements = tensor(elements, device=test_elements.device)
    if not isinstance(test_elements, Tensor):
        test_elements = tensor(test_elements, device=elements.device)
    found = logical.any(logical.eq(elements.reshape(*elements.shape, 1), test_elements.reshape(-1)), -1)
    return logical.logical_not(found) if invert else found
