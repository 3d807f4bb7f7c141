"""A GradScaler's work on all its gradients of a device as single recorded ops: the check for an inf or a nan
(`nonfinite`) and the unscale (`scaled`)."""

from .. import ggml
from ..autograd.lowering import choice
from ..autograd.primitive import Primitive
from ..ggml import kernels, ops
from ..ggml.errors import DTypeError


class NonFinite(Primitive):
    """sum(x * 0) over every element of the f32 tensors `xs`: nan exactly when one of them holds an inf or
    a nan, else 0. A GradScaler's check of all its gradients on a device as one recorded op."""

    @staticmethod
    def build(ctx, graph, *xs):   # contiguous (Primitive's inputs)
        return _nonfinite_node(graph, xs)

    @staticmethod
    def shape(*xs):
        return ()


@choice("nonfinite")
def _nonfinite_node(graph, xs):
    """Each gradient's rows times a column of zeros, one matrix-vector product, a single read of it (each row's
    sum of x * 0 in a vector kernel; a SUM over a whole gradient is a single slow workgroup on Vulkan, 48 ms a
    big-GPT step on the H200, and x * 0 written out first would be a pass more), summed, and added up."""
    parts = []
    for x in xs:
        width = x.ne[0]
        rows = ops.reshape_2d(graph.ctx, x, width, x.nelements // width)
        parts.append(ops.sum(graph.ctx, ops.mul_mat(graph.ctx, rows, graph.zeros(width))))
    return _added(graph, parts)


@_nonfinite_node.alternative("kernel")
def _nonfinite_by_kernel(graph, xs):
    """ggrad's kernel over up to NONFINITE_SOURCES gradients a node, its slots summed, the parts added up."""
    step = kernels.NONFINITE_SOURCES
    return _added(graph, [ops.sum(graph.ctx, kernels.nonfinite_f32(graph.ctx, xs[start:start + step]))
                          for start in range(0, len(xs), step)])


def _added(graph, parts):
    """The sum of the 0-d nodes `parts`, added in order."""
    total = parts[0]
    for part in parts[1:]:
        total = ops.add(graph.ctx, total, part)
    return total


class Scaled(Primitive):
    """The tensors `xs` times the 0-d `factor`, as one recorded op of several results: a GradScaler unscales
    all its gradients on a device so (an op a gradient before)."""
    multiple_results = True

    @staticmethod
    def build(ctx, graph, factor, *xs):
        return tuple(ops.mul(graph.ctx, x, factor) for x in xs)

    @staticmethod
    def shape(factor, *xs):
        return tuple(x.shape for x in xs)

    @staticmethod
    def result_dtype(factor, *xs):
        return tuple(x.dtype for x in xs)


def scaled(xs, factor):
    """The f32 tensors `xs` (with elements, on one device) times the 0-d f32 `factor` (see Scaled)."""
    for x in (factor,) + tuple(xs):
        if x.dtype is not ggml.f32:
            raise DTypeError(f"scaled: expected float32 tensors, got {x.dtype.name}")
    return Scaled.apply(factor, *xs)


def nonfinite(xs):
    """The 0-d f32 sum(x * 0) over the f32 tensors `xs` (with elements, on one device; see NonFinite)."""
    for x in xs:
        if x.dtype is not ggml.f32:
            raise DTypeError(f"nonfinite: expected float32 tensors, got {x.dtype.name}")
    return NonFinite.apply(*xs)
