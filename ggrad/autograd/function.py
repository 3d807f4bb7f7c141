"""`Function`: an op with a forward and a backward, and the graph node it leaves behind.

As in PyTorch: subclass `Function`, write static `forward(ctx, *args)` and `backward(ctx, *grads)` with
ggrad ops, call it through `MyFn.apply(...)`. `ctx.save_for_backward(...)` keeps tensors for backward;
`ctx.needs_input_grad` says which inputs want a gradient; backward returns one gradient per input
(None where there is none). Any other attribute set on ctx is the Function's own: the engine keeps its
bookkeeping on the `Node` (a Tensor's `grad_fn`), so nothing a user sets can collide with it.
ggrad's own GGML-built ops are `Primitive`s (primitive.py), a kind of Function.
"""

import weakref

from . import grad_mode
from . import tensor as _tensor  # a module reference: tensor.py imports this module's users first

FREED_GRAPH = ("Trying to backward through the graph a second time (or to use saved tensors after they were "
               "freed). Saved intermediate values are freed after backward(); pass retain_graph=True to the "
               "first backward() if you need to backward through the graph again.")


class FunctionCtx:
    """The context a Function's forward and backward share.

    Attributes:
        needs_input_grad: a bool per forward argument.
    """

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self._saved = ()
        self._versions = ()
        self._freed = False

    def save_for_backward(self, *tensors):
        """Keep `tensors` (or None) for backward, read back as `saved_tensors`; an in-place op on one of
        them before backward makes `saved_tensors` raise, as in PyTorch."""
        self._saved = tensors
        self._versions = tuple((weakref.ref(t), t._version) for t in tensors if t is not None)

    def _watch(self, t):
        """Also raise at backward if `t` (an output kept as a detached alias) is modified in place."""
        self._versions += ((weakref.ref(t), t._version),)

    @property
    def saved_tensors(self):
        if self._freed:
            raise RuntimeError(FREED_GRAPH)
        for ref, version in self._versions:
            t = ref()
            if t is not None and t._version != version:
                raise RuntimeError(f"one of the variables needed for gradient computation has been modified by an "
                                   f"inplace operation: [{t.dtype.name} {list(t.shape)}] is at version "
                                   f"{t._version}; expected version {version} instead")
        return self._saved

    def _free(self):
        """Release what backward needed: saved tensors and the Function's own attributes."""
        needs = self.needs_input_grad
        self.__dict__.clear()
        self.needs_input_grad, self._saved, self._versions, self._freed = needs, (), (), True


class Node:
    """A recorded application of a Function: the `grad_fn` of its outputs, a node of the backward graph.

    Attributes:
        fn: the Function class; ctx: its FunctionCtx.
        next_edges: per forward argument, where its gradient goes: a leaf Tensor (accumulate into
            `.grad`), a `(Node, output_index)` pair, or None.
        outputs: (shape, dtype, device) of every output, for zero gradients of unused outputs.
        retained: {output_index: weakref} of outputs that asked for `retain_grad()`.
    """

    __slots__ = ("fn", "ctx", "next_edges", "outputs", "retained")

    def __init__(self, fn, ctx, next_edges, outputs):
        self.fn, self.ctx, self.next_edges, self.outputs = fn, ctx, next_edges, outputs
        self.retained = None

    @property
    def n_outputs(self):
        return len(self.outputs)

    @property
    def freed(self):
        return self.ctx._freed

    @property
    def name(self):
        return self.fn.__name__

    @property
    def next_functions(self):
        """(Node or None, output index) per input, as PyTorch's grad_fn.next_functions."""
        return tuple(e if isinstance(e, tuple) else (None, 0) for e in self.next_edges)

    def __repr__(self):
        return f"<{self.name}Backward>"


class Function:
    """Base class of differentiable operations; see the module docstring."""

    # Primitives build GGML nodes directly in forward and need no grad-mode switch around it.
    primitive = False

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward(ctx, *args)")  # as PyTorch

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("a Function subclass must define backward(ctx, *grads) to be differentiated")

    @classmethod
    def gradients(cls, ctx, grads):
        """The gradients of one recorded application, as the engine asks for them."""
        return cls.backward(ctx, *grads)

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run forward and, when an input requires grad, record the op for backward."""
        return apply_function(cls, args, kwargs)


def apply_function(fn, args, kwargs=None):
    """`fn.apply(*args, **kwargs)`: forward, then the backward Node on every float output."""
    Tensor = _tensor.Tensor
    needs = tuple([isinstance(a, Tensor) and a.requires_grad for a in args])
    ctx = FunctionCtx(needs)
    if fn.primitive:
        out = fn.forward(ctx, *args, **kwargs) if kwargs else fn.forward(ctx, *args)
    else:
        with grad_mode.no_grad():
            out = fn.forward(ctx, *args, **(kwargs or {}))
    if True not in needs or not grad_mode.is_grad_enabled():
        return out
    outputs = out if isinstance(out, tuple) else (out,)
    for o in outputs:
        if not isinstance(o, Tensor):
            raise TypeError(f"{fn.__name__}.forward must return Tensors, got {type(o).__name__}")
    edges = tuple([_edge(a) if need else None for a, need in zip(args, needs)])
    node = Node(fn, ctx, edges, tuple([(o.shape, o.dtype, o.device) for o in outputs]))
    for i, o in enumerate(outputs):
        if o.dtype.is_float:
            o.grad_fn = node
            o._output_nr = i
            o.requires_grad = True
    return out


def _edge(t):
    if t.grad_fn is not None:
        return (t.grad_fn, t._output_nr)
    return t
