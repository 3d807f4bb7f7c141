"""Where a real binary op meets a complex operand (a complex tensor, a Python or numpy complex number).

The complex tensor (complex_tensor.py) is built from the real ops, so they cannot import it: it registers
its arithmetic here, and a real op asks for it only in the branch that would refuse such an operand
(`ggrad.mul(x, 1j)`, `x + z`, `x @ z`), so real operands pay nothing for complex support.
"""

import numpy as np

_FORMS = {}   # op name -> its complex form (a, b) -> complex tensor
_COMPLEX = (complex, np.complexfloating)


def register(tensor_type, forms):
    """Hand operands of `tensor_type` (and complex numbers) of the ops named in `forms` to those forms."""
    global _COMPLEX
    _COMPLEX = (complex, np.complexfloating, tensor_type)
    _FORMS.update(forms)


def complex_form(op, a, b):
    """The complex form of the op `op` when `a` or `b` is complex, else None."""
    if isinstance(a, _COMPLEX) or isinstance(b, _COMPLEX):
        return _FORMS.get(op)
    return None
