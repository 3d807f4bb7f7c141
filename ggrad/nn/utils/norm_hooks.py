"""The forward pre-hooks that weight_norm and spectral_norm register on a module: found and removed by
their class and the parameter they re-parameterize."""


def norm_hook(module, kind, name):
    """The forward pre-hook of class `kind` on `module` that re-parameterizes its parameter `name`, or None."""
    hooks = module.__dict__.get("_hooks")   # ggrad.nn.hooks keeps a module's hooks there
    for hook in (hooks.forward_pre.values() if hooks is not None else ()):
        if isinstance(hook, kind) and hook.name == name:
            return hook
    return None


def remove_norm_hook(module, kind, name, label):
    """Fold the parameter `name` back as `kind`'s hook computes it; ValueError naming `label` if none is there."""
    hook = norm_hook(module, kind, name)
    if hook is None:
        raise ValueError(f"{label} of '{name}' not found in {module}")
    hook.remove(module)
    return module
