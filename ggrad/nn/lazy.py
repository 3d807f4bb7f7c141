"""Lazy modules (PyTorch's LazyLinear, LazyConv*, LazyConvTranspose*, LazyBatchNorm*, LazyInstanceNorm*): the
input size is read from the first forward's input, which builds the module they stand for and becomes it.

Until then the parameters are `UninitializedParameter`s (empty), as PyTorch's, so an optimizer may be made
before the first forward. At the first call the module is built with the inferred size (in_features from the
input's last dim, in_channels / num_features from its channel dim), each placeholder takes its parameter's
values in place (the optimizer keeps the same objects) and becomes a Parameter, and this object takes the
built module's state and class, so hooks and references to it stay valid and `type(m)` is then Linear,
Conv2d, ... as PyTorch's `cls_to_become`. Differences from PyTorch: the buffers (BatchNorm's running
statistics) appear at that call, and a state dict cannot be loaded before it.
"""

from ..autograd import Parameter
from .batch_norm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from .conv3d import Conv3d
from .conv_transpose3d import ConvTranspose3d
from .group_norm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .linear import Linear
from .module import Module

__all__ = ["UninitializedParameter", "LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


class UninitializedParameter(Parameter):
    """A lazy module's parameter before its first forward: empty, until it takes its values in place."""

    __slots__ = ()

    def materialize(self, values):
        """Take `values` (a Tensor) in place and become a Parameter."""
        self.data = values.detach()
        self.__class__ = Parameter

    def __repr__(self):
        return "<UninitializedParameter>"


class _LazyModule(Module):
    """Holds the constructor's arguments until the first forward tells the missing size."""

    cls_to_become = None
    spatial = None   # a convolution's spatial dims (its input may be unbatched); None: see `size_dim`
    size_dim = -1    # where the size is read otherwise: Linear's last dim, the norms' dim 1 (as PyTorch)
    defaults = ()    # (position, name, value): PyTorch's lazy defaults that differ from the built class's

    def __init__(self, *args, **kwargs):
        super().__init__()
        kwargs = {**{name: value for position, name, value in self.defaults if len(args) <= position}, **kwargs}
        object.__setattr__(self, "_lazy_arguments", (args, kwargs))
        # a module of the smallest valid size checks the arguments and names the parameters to hold
        probe_size = (args[0] if args else kwargs.get("out_channels", 1)) if self.spatial is not None else 1
        probe = self.cls_to_become(probe_size, *args, **kwargs)
        for name, param in probe._parameters.items():
            if param is None:
                self.register_parameter(name, None)
            else:
                placeholder = UninitializedParameter(param.new_empty((0,)), requires_grad=param.requires_grad)
                self.register_parameter(name, placeholder)

    def has_uninitialized_params(self):
        """True until the first forward (then this is the built module's class, which has no such method)."""
        return True

    def _inferred_size(self, input):  # noqa: A002 (PyTorch's name)
        if self.spatial is None:
            return input.shape[self.size_dim]
        if input.ndim not in (self.spatial + 1, self.spatial + 2):
            raise ValueError(f"{type(self).__name__}: expected a {self.spatial + 1}-D (unbatched) or "
                             f"{self.spatial + 2}-D (batched) input, got shape {tuple(input.shape)}")
        return input.shape[1] if input.ndim == self.spatial + 2 else input.shape[0]

    def initialize_parameters(self, input, *args, **kwargs):  # noqa: A002
        """Build the module this one stands for, sized by `input`, and become it."""
        args_, kwargs_ = self._lazy_arguments
        built = self.cls_to_become(self._inferred_size(input), *args_, **kwargs_)
        for name, placeholder in self._parameters.items():
            if placeholder is not None:   # the optimizer's objects take the built values
                placeholder.materialize(built._parameters[name])
                built._parameters[name] = placeholder
        training, hooks = self.training, self.__dict__.get("_hooks")
        self.__dict__.clear()
        self.__dict__.update(built.__dict__)
        if hooks is not None:
            self.__dict__["_hooks"] = hooks
        self.__class__ = self.cls_to_become
        self.train(training)

    def forward(self, input, *args, **kwargs):  # noqa: A002
        self.initialize_parameters(input)
        return self.forward(input, *args, **kwargs)

    def extra_repr(self):
        args, kwargs = self._lazy_arguments
        return ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])


def _lazy(name, cls, spatial=None, size_dim=-1, defaults=()):
    doc = f"{cls.__name__} whose input size is read from the first forward's input (PyTorch's {name})."
    return type(name, (_LazyModule,), {"cls_to_become": cls, "spatial": spatial, "size_dim": size_dim,
                                       "defaults": defaults, "__doc__": doc, "__module__": __name__})


_INSTANCE_NORM_DEFAULTS = ((2, "affine", True), (3, "track_running_stats", True))   # PyTorch's Lazy forms' own


LazyLinear = _lazy("LazyLinear", Linear)
LazyConv1d = _lazy("LazyConv1d", Conv1d, 1)
LazyConv2d = _lazy("LazyConv2d", Conv2d, 2)
LazyConv3d = _lazy("LazyConv3d", Conv3d, 3)
LazyConvTranspose1d = _lazy("LazyConvTranspose1d", ConvTranspose1d, 1)
LazyConvTranspose2d = _lazy("LazyConvTranspose2d", ConvTranspose2d, 2)
LazyConvTranspose3d = _lazy("LazyConvTranspose3d", ConvTranspose3d, 3)
LazyBatchNorm1d = _lazy("LazyBatchNorm1d", BatchNorm1d, size_dim=1)
LazyBatchNorm2d = _lazy("LazyBatchNorm2d", BatchNorm2d, size_dim=1)
LazyBatchNorm3d = _lazy("LazyBatchNorm3d", BatchNorm3d, size_dim=1)
LazyInstanceNorm1d = _lazy("LazyInstanceNorm1d", InstanceNorm1d, size_dim=1, defaults=_INSTANCE_NORM_DEFAULTS)
LazyInstanceNorm2d = _lazy("LazyInstanceNorm2d", InstanceNorm2d, size_dim=1, defaults=_INSTANCE_NORM_DEFAULTS)
LazyInstanceNorm3d = _lazy("LazyInstanceNorm3d", InstanceNorm3d, size_dim=1, defaults=_INSTANCE_NORM_DEFAULTS)
