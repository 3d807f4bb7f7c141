"""Exception types. Each also inherits the builtin users would catch (ValueError, TypeError, ...)."""


class GGRADError(Exception):
    """Base class of every error ggrad raises on purpose."""


class ShapeError(GGRADError, ValueError, RuntimeError):
    """Shapes, strides or dimensions that an op cannot accept. PyTorch raises RuntimeError for these; ggrad's
    earlier releases raised ValueError: this is both."""


class IndexOutOfRangeError(GGRADError, IndexError, RuntimeError):
    """An index outside a dimension. PyTorch raises IndexError for most (indexing, index_select, embedding),
    RuntimeError for some (gather, scatter): this is both."""


class DTypeError(GGRADError, TypeError, RuntimeError):
    """A tensor type that an op or conversion cannot accept (PyTorch raises RuntimeError for most of these,
    TypeError for some: this is both)."""


class DeviceError(GGRADError, ValueError):
    """An unknown device, a device mismatch, or a backend that cannot be started."""


class DeviceLostError(DeviceError, RuntimeError):
    """A device stopped answering: its RPC server died, timed out or sent what GGML cannot take."""


class GGMLError(GGRADError, RuntimeError):
    """GGML reported a failure (allocation, compute, file format)."""


class ArgumentError(GGRADError, ValueError, RuntimeError):
    """A scalar or enum argument outside what an op accepts (PyTorch's C++ ops raise RuntimeError, its Python
    ones ValueError: this is both)."""


class FormatError(GGRADError, ValueError):
    """A file that is truncated, corrupted, hostile or not in the format expected."""


class UnsupportedDTypeError(DTypeError, NotImplementedError):
    """A dtype the op has no kernel for (PyTorch's "not implemented for 'Int'" is a NotImplementedError; a
    dtype GGML cannot compute where PyTorch would raises this too, saying so)."""


class UnsupportedShapeError(ShapeError, NotImplementedError):
    """A rank or layout the op has no kernel for (PyTorch's NotImplementedError for, e.g., interpolating a
    2-D input; a shape GGML cannot compute where PyTorch would raises this too, saying so)."""
