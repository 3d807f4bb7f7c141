"""`Function`: an op with a forward and a backward, and the graph node it leaves behind.

As in PyTorch: subclass `Function`, write static `forward(ctx, *args)` and `backward(ctx, *grads)` with
ggrad ops, call it through `MyFn.apply(...)`. `ctx.save_for_backward(...)` keeps tensors for backward;
`ctx.needs_input_grad` says which inputs want a gradient; backward returns one gradient per input
(None where there is none). ggrad's own differentiable primitives are Functions too.
"""

from . import grad_mode
from . import tensor as _tensor  # a module reference: tensor.py imports this module's users first

_FREED = ("Trying to backward through the graph a second time (or to use saved tensors after they were "
          "freed). Saved intermediate values are freed after backward(); pass retain_graph=True to the first "
          "backward() if you need to backward through the graph again.")


class FunctionCtx:
    """The context passed to forward/backward, and the node of the backward graph.

    Attributes:
        needs_input_grad: a bool per forward argument.
        next_edges: per forward argument, where its gradient goes: a leaf Tensor (accumulate into
            `.grad`), a `(FunctionCtx, output_index)` pair, or None.
    """

    def __init__(self):
        self._saved = ()
        self._freed = False
        self.fn = None
        self.next_edges = ()
        self.needs_input_grad = ()
        self.n_outputs = 1
        self.retained = None

    def save_for_backward(self, *tensors):
        self._saved = tensors

    @property
    def saved_tensors(self):
        if self._freed:
            raise RuntimeError(_FREED)
        return self._saved

    def mark_freed(self):
        """Release what backward needed (called after a backward without retain_graph)."""
        self._freed = True
        self._saved = ()
        for key in [k for k in self.__dict__ if not k.startswith("_") and k not in _NODE_FIELDS]:
            del self.__dict__[key]

    @property
    def name(self):
        return self.fn.__name__ if self.fn is not None else "?"

    def __repr__(self):
        return f"<{self.name}Backward>"


_NODE_FIELDS = {"fn", "next_edges", "needs_input_grad", "n_outputs", "retained", "output_shapes", "device"}


class Function:
    """Base class of differentiable operations; see the module docstring."""

    # Primitives build GGML nodes directly in forward and need no grad-mode switch around it.
    primitive = False

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward(ctx, *args)")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("a Function subclass must define backward(ctx, *grads) to be differentiated")

    @classmethod
    def apply(cls, *args, **kwargs):
        Tensor = _tensor.Tensor
        ctx = FunctionCtx()
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        record = any(needs) and grad_mode.is_grad_enabled()
        ctx.needs_input_grad = needs
        if cls.primitive:
            out = cls.forward(ctx, *args, **kwargs)
        else:
            with grad_mode.no_grad():
                out = cls.forward(ctx, *args, **kwargs)
        if not record:
            return out
        ctx.fn = cls
        ctx.next_edges = tuple(_edge(a) if need else None for a, need in zip(args, needs))
        outputs = out if isinstance(out, tuple) else (out,)
        ctx.n_outputs = len(outputs)
        if len(outputs) > 1:
            ctx.output_shapes = tuple(o.shape for o in outputs)
            ctx.device = outputs[0].device
        for i, o in enumerate(outputs):
            if not isinstance(o, Tensor):
                raise TypeError(f"{cls.__name__}.forward must return Tensors, got {type(o).__name__}")
            if o.dtype.is_float:
                o.grad_fn = ctx
                o._output_nr = i
                o.requires_grad = True
        return out


def _edge(t):
    if t.grad_fn is not None:
        return (t.grad_fn, t._output_nr)
    return t
