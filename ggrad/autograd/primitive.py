"""`Primitive`: the one shape of an op that GGML computes.

A primitive says four things and the engine does the rest (finding the pending graph of the inputs'
device, passing their GGML nodes in, wrapping the result as a Tensor, saving what backward reads,
recording the op for autograd):

    class Exp(Primitive):
        '''y = e**x'''
        dtypes = FLOAT                       # the dtype rule (dtype_rules.py)
        saves = "output"                     # what backward reads as ctx.saved_tensors

        @staticmethod
        def build(ctx, graph, x):            # the GGML builder: Tensors arrive as their nodes
            return ops.exp(graph.ctx, x)

        @staticmethod
        def backward(ctx, g):                # the gradient rule, as math over Tensors
            y, = ctx.saved_tensors
            return g * y

A result too large for GGML's int64 and size_t counts raises ShapeError before any node is made
(sizes.py). Operands or results without elements never reach GGML: the result is `empty_value` everywhere (0, the
sum of nothing, unless an op says otherwise). The engine sets `ctx.shapes`, the shapes of the Tensor inputs, for backward rules.
`shape(*args)` and `result_dtype(*args)` give the result's shape and dtype when they differ from the
first input's. Inputs arrive contiguous unless `views = True` (ops that take strided views).
"""

from typing import Any

import numpy as np

from . import device_locks, grad_mode, sizes
from .factory import zeros
from .function import Function, apply_function
from .memory import graph_of
from .recording import alias, emit, leaf
from .tensor import Tensor
from .trace_cache import primitive_key
from ..ggml import GTensor, f32


class Primitive(Function):
    """Base class of ggrad's GGML-built ops; see the module docstring."""

    primitive = True
    _replayable = True
    views = False   # True: `build` gets the inputs' nodes with their strides, not contiguous copies
    saves: Any = None    # None, "input" (the first), "inputs" (every Tensor input), "output", "input+output",
    #                 or a tuple of argument positions
    dtypes: Any = None   # the dtype rule `apply` goes through (None: dtypes pass as they are)
    empty_value = 0.0   # every element of a result computed from zero-size operands (a sum of nothing)
    multiple_results = False   # True: `build` returns a tuple of nodes, `shape` and `result_dtype` one each
    #                            (a backward's gradients as one op; such a primitive has no backward of its own)

    @staticmethod
    def build(ctx, graph, *args):
        raise NotImplementedError("a Primitive must define build(ctx, graph, *args)")  # as Function.forward

    @staticmethod
    def shape(*args):
        """The numpy-order shape of the result (default: the first input's)."""
        return _first_tensor(args).shape

    @staticmethod
    def result_dtype(*args):
        """The dtype of the result (default: the first input's)."""
        return _first_tensor(args).dtype

    @classmethod
    def apply(cls, *args):
        rule = cls.dtypes
        if rule is None:
            return apply_function(cls, args)
        return rule(cls, args)

    @classmethod
    def forward(cls, ctx, *args):
        tensors = [a for a in args if isinstance(a, Tensor)]
        with device_locks.lock_of(tensors[0].device):
            return cls._record(ctx, args, tensors)

    @classmethod
    def _record(cls, ctx, args, tensors):
        if cls.multiple_results:
            return cls._record_multiple(ctx, args, tensors)
        shapes = ctx.shapes = tuple([t.shape for t in tensors])
        graph = graph_of(*tensors)
        # the defaults (the first input's shape and dtype) without a call each
        shape = shapes[0] if cls.shape is _default_shape else cls.shape(*args)
        dtype = tensors[0].dtype if cls.result_dtype is _default_dtype else cls.result_dtype(*args)
        sizes.check(cls.__name__, shape, dtype)
        if 0 in shape or _has_zero_size(shapes):
            out = cls.empty(graph, shape, dtype)
            ctx.constant_result = tuple((a.shape, a.dtype, a.device) if isinstance(a, Tensor) else None
                                        for a in args)
        else:
            out = emit(graph, cls._built(ctx, graph, args, shapes), shape, dtype)
        # what backward reads, only where a backward node is recorded (apply_function: an input needs a
        # gradient, grad mode on); a backward pass's own ops skip it
        if cls.saves is not None and True in ctx.needs_input_grad and grad_mode.is_grad_enabled():
            ctx.save_for_backward(*cls.saved(ctx, args, out))
            if "output" in cls.saves:
                ctx._watch(out)
        return out

    @classmethod
    def _record_multiple(cls, ctx, args, tensors):
        shapes = ctx.shapes = tuple([t.shape for t in tensors])
        graph = graph_of(*tensors)
        out_shapes, dtypes = cls.shape(*args), cls.result_dtype(*args)
        for s, d in zip(out_shapes, dtypes):
            sizes.check(cls.__name__, s, d)
        if _has_zero_size(out_shapes) or _has_zero_size(shapes):
            return tuple([cls.empty(graph, s, d) for s, d in zip(out_shapes, dtypes)])
        nodes = cls._built(ctx, graph, args, shapes)
        return tuple([emit(graph, n, s, d) for n, s, d in zip(nodes, out_shapes, dtypes)])

    @classmethod
    def _built(cls, ctx, graph, args, shapes):
        """`build`'s node (or tuple of nodes) on the inputs' nodes, as one event of the graph cache's trace
        where one records or replays."""
        take = graph.node if cls.views else graph.contiguous
        inputs = [take(a) if isinstance(a, Tensor) else a for a in args]
        trace = graph.trace
        if trace is None or trace.depth:
            return cls.build(ctx, graph, *inputs)
        return trace.event(graph, primitive_key(cls, shapes, inputs), [g for g in inputs if g.__class__ is GTensor],
                           lambda: cls.build(ctx, graph, *inputs), ctx)

    @classmethod
    def gradients(cls, ctx, grads):
        """A constant result (zero-size operands) has zero gradients; otherwise the op's own rule."""
        constant = getattr(ctx, "constant_result", None)
        if constant is None:
            return cls.backward(ctx, *grads)
        return tuple(None if spec is None or not need else zeros(spec[0], dtype=spec[1], device=spec[2])
                     for spec, need in zip(constant, ctx.needs_input_grad))

    @classmethod
    def empty(cls, graph, shape, dtype):
        """The result when an operand or the result has no elements. GGML is never called on zero-size
        tensors (many of its ops assert on them): the result is a constant, `empty_value` everywhere."""
        return leaf(graph.device, np.full(shape, cls.empty_value, dtype=dtype.numpy or np.float32), dtype)

    @classmethod
    def saved(cls, ctx, args, out):
        """The tensors to keep for backward, by `saves`; a primitive may override it."""
        saves = cls.saves
        if not isinstance(saves, tuple) and saves not in ("input", "inputs", "output", "input+output"):
            raise ValueError(f"{cls.__name__}.saves: unknown value {saves!r}")
        inputs = tuple(args[i] for i in cls.saved_positions(args))
        return inputs + (alias(out),) if saves in ("output", "input+output") else inputs

    @classmethod
    def saved_positions(cls, args):
        """The positions of the arguments that `saves` keeps for backward."""
        saves = cls.saves
        if isinstance(saves, tuple):
            return saves
        if saves in ("input", "input+output"):
            return (0,)
        if saves == "inputs":
            return tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
        return ()


def one_op_gradient(g, x):
    """Whether the backward of an op with a one-op gradient (GELU's, layer norm's: a CPU kernel, or the
    composition's GGML nodes built in one recorded op) takes it for `g` at `x`: float32 both, and the backward
    not itself recorded (create_graph), whose ops must have gradients of their own (the composition's
    Tensor ops)."""
    return x.dtype is f32 and g.dtype is f32 and not grad_mode.is_grad_enabled()


def _has_zero_size(shapes):
    for s in shapes:
        if 0 in s:
            return True
    return False


def _first_tensor(args):
    for a in args:
        if isinstance(a, Tensor):
            return a
    raise TypeError("a Primitive needs at least one Tensor argument")


_default_shape = Primitive.shape
_default_dtype = Primitive.result_dtype
