"""`functional_call` (PyTorch's torch.func.functional_call and torch.nn.utils.stateless.functional_call): a
module's forward with some of its parameters and buffers replaced by given tensors, for meta-learning
(MAML's inner steps), ensembles and per-sample computations. The module is left as it was, even when the
forward raises.
"""

from ...autograd import Tensor

__all__ = ["functional_call"]


def _slot(module, name):
    """(the submodule holding `name`, its dict (_parameters or _buffers), the last part of the name)."""
    path, _, leaf = name.rpartition(".")
    owner = module.get_submodule(path) if path else module
    for store in (owner._parameters, owner._buffers):
        if leaf in store:
            return owner, store, leaf
    raise AttributeError(f"{type(owner).__name__} has no parameter or buffer named '{leaf}' ('{name}')")


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """module(*args, **kwargs) with the named tensors of `parameter_and_buffer_dicts` (a dict, or a sequence
    of dicts with distinct keys) in place of the module's own. `tie_weights`: a tensor shared under several
    names is replaced everywhere when one name is given; `strict`: every parameter and buffer must be given
    (a tied one through any of its names)."""
    dicts = [parameter_and_buffer_dicts] if isinstance(parameter_and_buffer_dicts, dict) else \
        list(parameter_and_buffer_dicts)
    given = {}
    for d in dicts:
        for key, value in d.items():
            if key in given:
                raise ValueError(f"{key} appeared in multiple dictionaries; behavior of functional call is ambiguous")
            given[key] = value
    owned = dict(module.named_parameters(remove_duplicate=False))
    owned.update(module.named_buffers(remove_duplicate=False))
    if tie_weights:   # every name of a shared tensor takes the value given for one of them
        for name, tensor in owned.items():
            if name not in given:
                for other, value in list(given.items()):
                    if other in owned and owned[other] is tensor:
                        given[name] = value
                        break
    if strict:
        missing, unexpected = sorted(set(owned) - set(given)), sorted(set(given) - set(owned))
        if missing or unexpected:
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}: missing keys {missing}, "
                               f"unexpected keys {unexpected}")
    saved = []
    try:
        for name, value in given.items():
            if not isinstance(value, Tensor) and value is not None:
                raise TypeError(f"functional_call: the value for '{name}' must be a Tensor, got "
                                f"{type(value).__name__}")
            owner, store, leaf = _slot(module, name)
            saved.append((store, leaf, store[leaf]))
            store[leaf] = value
        args = () if args is None else args if isinstance(args, tuple) else (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for store, leaf, value in reversed(saved):
            store[leaf] = value
