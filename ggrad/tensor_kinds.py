"""Tensor subclasses that checkpoints record by name, registered by the layer that defines them.

`ggrad.nn` registers `Parameter` here, so that saving and loading know Parameters without importing
`nn` (serialization sits below it).
"""

_KINDS = {}  # name -> (class, make(tensor, requires_grad) -> instance)


def register(name, cls, make):
    """Record Tensor subclass `cls` as `name`; `make(tensor, requires_grad)` rebuilds one on load."""
    _KINDS[name] = (cls, make)


def kind_of(t):
    """The registered name of `t`'s class, or None for a plain Tensor."""
    for name, (cls, _) in _KINDS.items():
        if isinstance(t, cls):
            return name
    return None


def rebuild(name, t, requires_grad):
    """`t` as the registered kind `name` (a plain Tensor with `requires_grad` if `name` is unknown)."""
    if name in _KINDS:
        return _KINDS[name][1](t, requires_grad)
    return t.requires_grad_(True) if requires_grad else t
