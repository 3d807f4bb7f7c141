"""Which layers of a model a transformation (quantize_, lora_) applies to: the `modules=` argument."""

from .module import Module


def select_modules(model, modules, kinds, op):
    """[(dotted name, module, named explicitly)] of `model`'s layers of the types `kinds` chosen by `modules`.

    `modules` is None (every layer of `kinds`), a list of dotted names (each must be such a layer), a type
    or tuple of types (narrowing `kinds`), or a predicate `(name, module) -> bool`.
    """
    if not isinstance(model, Module):
        raise TypeError(f"{op}: expected a ggrad.nn.Module, got {type(model).__name__}")
    layers = [(n, m) for n, m in model.named_modules() if isinstance(m, kinds)]
    kind_names = ", ".join(k.__name__ for k in kinds)
    if modules is None:
        return [(n, m, False) for n, m in layers]
    if isinstance(modules, type) or (isinstance(modules, tuple) and modules
                                     and all(isinstance(k, type) for k in modules)):
        return [(n, m, False) for n, m in layers if isinstance(m, modules)]
    if callable(modules):
        return [(n, m, False) for n, m in layers if modules(n, m)]
    if isinstance(modules, str) or not all(isinstance(n, str) for n in modules):
        raise TypeError(f"{op}: modules must be None, a list of layer names, a layer type or a predicate "
                        f"(name, module) -> bool, got {modules!r:.80}")
    by_name = dict(model.named_modules())
    chosen = []
    for name in modules:
        if name not in by_name:
            raise ValueError(f"{op}: the model has no submodule {name!r}")
        if not isinstance(by_name[name], kinds):
            raise TypeError(f"{op}: {name!r} is a {type(by_name[name]).__name__}; only {kind_names} layers apply")
        chosen.append((name, by_name[name], True))
    return chosen
