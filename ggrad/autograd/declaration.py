"""Every public op declared once, beside its code: `@declare(...)` above a def, `declare(fn, ...)` after an
assignment.

A declaration says what the function alone cannot: whether it is a function of ggrad (`ggrad.exp`), a Tensor
method (`x.exp()`), whether it has an in-place method (`x.exp_()`) and which other names PyTorch gives it
(`arctan` for `atan`). ggrad's functional API (ops/__init__.py), the Tensor methods (methods.py) and the methods'
stub (tensor_methods.pyi, by `python scripts/generate_stubs.py`) are read from this registry; an op's
autocast class is declared beside it too, by the hook it carries (autocast_hook.autocast_op).
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Declaration:
    """One op: its function, where it appears (`function`: ggrad.<name>; `method`: Tensor.<name>;
    `inplace`: Tensor.<name>_) and its `aliases` (each appears where the name does)."""
    name: str
    fn: object
    function: bool
    method: bool
    inplace: bool
    aliases: tuple

    @property
    def names(self):
        return (self.name,) + self.aliases


DECLARED = {}   # name -> Declaration, in the order the op modules declare them


def declare(fn=None, *, function=True, method=False, inplace=False, aliases=()):
    """Register `fn` (its `__name__` is the op's name) and return it unchanged; without `fn`, a decorator."""
    if fn is None:
        return lambda f: declare(f, function=function, method=method, inplace=inplace, aliases=aliases)
    name = fn.__name__
    if name in DECLARED:
        raise ValueError(f"declare: the op {name!r} is declared twice ({DECLARED[name].fn.__module__} and "
                         f"{fn.__module__})")
    DECLARED[name] = Declaration(name, fn, function, method, inplace, tuple(aliases))
    return fn


def functions():
    """ggrad's functional API: name -> function, aliases included."""
    return {alias: d.fn for d in DECLARED.values() if d.function for alias in d.names}


def methods():
    """The Tensor methods that are ops: name -> function taking the tensor first, aliases included."""
    return {alias: d.fn for d in DECLARED.values() if d.method for alias in d.names}


def inplace_forms():
    """The ops with an in-place method: method name (`exp_`) -> the op it writes back."""
    return {alias + "_": d.fn for d in DECLARED.values() if d.inplace for alias in d.names}
