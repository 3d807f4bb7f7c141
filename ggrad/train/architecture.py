"""How `ggrad.Sequential.save/load` describe layers: each layer's class and constructor arguments as JSON.

Arguments are read back from the layer's attributes of the same names (PyTorch layers keep them), or
from its `get_config()`, when the layer first joins a `ggrad.Sequential` (or, for the layers of a
nested `nn.Sequential`, when the model is saved).
"""

import importlib
import inspect
import weakref

from .. import nn
from ..autograd import Tensor

_CONFIGS = weakref.WeakKeyDictionary()   # layer -> its recorded config (or the reason there is none)
_SKIPPED_ARGS = ("device", "dtype")
_JSON_TYPES = (bool, int, float, str, type(None))


def _jsonable(value):
    if isinstance(value, _JSON_TYPES):
        return True
    if isinstance(value, (list, tuple)):
        return all(_jsonable(v) for v in value)
    return False


def _introspect(layer):
    """Constructor arguments read back from the attributes of the same name (PyTorch layers keep them)."""
    cls = type(layer)
    if hasattr(layer, "get_config") and not isinstance(layer, nn.Sequential):
        config = layer.get_config()
        if not isinstance(config, dict) or not _jsonable(list(config.values())):
            raise ValueError(f"{cls.__name__}.get_config() must return a dict of JSON-able values")
        return dict(config)
    config = {}
    for name, param in inspect.signature(cls.__init__).parameters.items():
        if name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if name == "dtype":
            dtypes = {p.dtype.name for p in layer.parameters()}
            if dtypes and dtypes != {"f32"}:
                config["dtype"] = sorted(dtypes)[0]
            continue
        if name in _SKIPPED_ARGS:
            continue
        if name in layer.__dict__ or name in layer._parameters or name in layer._buffers:
            value = getattr(layer, name)
            if isinstance(param.default, bool) and (value is None or isinstance(value, Tensor)):
                value = value is not None  # e.g. Linear(bias=True) keeps the bias Parameter (or None)
            if _jsonable(value):
                config[name] = list(value) if isinstance(value, tuple) else value
                continue
        if param.default is inspect.Parameter.empty:
            raise ValueError(f"cannot record the constructor argument {name!r} of {cls.__name__}: the layer does "
                             "not keep it as a JSON-able attribute of that name; give the class a get_config() "
                             "method returning its constructor arguments")
    return config


def record_config(layer):
    """Record a layer's class and constructor arguments (once: when it first joins a Sequential)."""
    if isinstance(layer, nn.Sequential) or layer in _CONFIGS:
        return
    try:
        _CONFIGS[layer] = {"class": type(layer).__name__, "module": type(layer).__module__,
                           "config": _introspect(layer)}
    except (ValueError, TypeError) as err:
        _CONFIGS[layer] = err   # reported by save(), which is when the config is needed


def layer_config(layer):
    """{"class", "module", "config"} of a layer, as recorded (nested Sequentials: their layers)."""
    if isinstance(layer, nn.Sequential):
        return {"class": type(layer).__name__, "module": type(layer).__module__, **sequential_config(layer)}
    record_config(layer)
    recorded = _CONFIGS[layer]
    if isinstance(recorded, Exception):
        raise ValueError(f"Sequential.save: {recorded}") from None
    return recorded


def sequential_config(model):
    """{"layers": [...]}: each layer's name, class and constructor arguments, in order."""
    return {"layers": [dict(name=name, **layer_config(layer)) for name, layer in model._modules.items()]}


def build_sequential(cls, config, custom_objects):
    """A new `cls` (a Sequential class) holding the layers of `config` (from `sequential_config`)."""
    model = cls()
    for entry in config["layers"]:
        model.add_module(entry["name"], build_layer(entry, custom_objects))
    return model


def build_layer(entry, custom_objects):
    """A new layer from a recorded config; classes come from ggrad's modules or `custom_objects`."""
    name, module = entry["class"], entry.get("module", "")
    cls = custom_objects.get(name)
    if cls is None and (module == "ggrad" or module.startswith("ggrad.")):
        cls = getattr(importlib.import_module(module), name, None)
    if cls is None:
        cls = getattr(nn, name, None)
    if cls is None or not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ValueError(f"Sequential.load: unknown layer class {name!r} (from {module!r}); pass it in "
                         f"custom_objects={{{name!r}: {name}}}")
    if "layers" in entry and issubclass(cls, nn.Sequential):
        return build_sequential(cls, entry, custom_objects)
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in entry.get("config", {}).items()}
    return cls(**kwargs)
