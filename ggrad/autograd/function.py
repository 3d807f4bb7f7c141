"""`Function`: an op with a forward and a backward, and the graph node it leaves behind.

As in PyTorch: subclass `Function`, write static `forward(ctx, *args)` and `backward(ctx, *grads)` with
ggrad ops, call it through `MyFn.apply(...)` (or PyTorch 2's `forward(*args)` plus
`setup_context(ctx, inputs, output)`). `ctx.save_for_backward(...)` keeps tensors for backward (inputs
or outputs: a saved output is differentiated through under create_graph); `ctx.needs_input_grad` says
which inputs want a gradient; `ctx.mark_non_differentiable(...)` and `ctx.set_materialize_grads(False)`
as PyTorch's; backward returns one gradient per input (None where there is none), checked as PyTorch
checks it (count; shape, a broadcast one summed down). Any other attribute set on ctx is the Function's
own: the engine keeps its bookkeeping on the `Node` (a Tensor's `grad_fn`), so nothing a user sets can
collide with it.
ggrad's own GGML-built ops are `Primitive`s (primitive.py), a kind of Function.
"""

import weakref

from . import grad_mode
from .graph import current_hooks
from .recording import alias
from .tensor import Tensor

FREED_GRAPH = ("Trying to backward through the graph a second time (or to use saved tensors after they were "
               "freed). Saved intermediate values are freed after backward(); pass retain_graph=True to the "
               "first backward() if you need to backward through the graph again.")


class FunctionCtx:
    """The context a Function's forward and backward share.

    Attributes:
        needs_input_grad: a bool per forward argument.
    """

    # class defaults until set: one attribute set per op, not eight
    _saved = _versions = _non_differentiable = ()
    _hooked = _saved_outputs = None
    _freed, _materialize = False, True

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad

    def save_for_backward(self, *tensors):
        """Keep `tensors` (or None) for backward, read back as `saved_tensors`; an in-place op on one of
        them before backward makes `saved_tensors` raise, as in PyTorch."""
        self._saved = tensors
        self._versions = tuple((weakref.ref(t), t._version) for t in tensors if t is not None)

    def _watch(self, t):
        """Also raise at backward if `t` (an output kept as a detached alias) is modified in place. The
        alias is the last saved tensor (Primitive.saved puts it there): marked as output 0, so that a
        backward with create_graph differentiates through it."""
        self._versions += ((weakref.ref(t), t._version),)
        self._saved_outputs = ((len(self._saved) - 1, 0),)

    def mark_non_differentiable(self, *tensors):
        """Outputs of forward that get no gradient (indices, masks): they do not require grad."""
        self._non_differentiable = tuple(tensors)

    def set_materialize_grads(self, value):
        """False: backward receives None, not zeros, for outputs that got no gradient."""
        self._materialize = bool(value)

    @property
    def saved_tensors(self):
        if self._freed:
            raise RuntimeError(FREED_GRAPH)
        changed = self._changed_in_place()
        if changed is not None:
            t, version = changed
            raise RuntimeError(f"one of the variables needed for gradient computation has been modified by an "
                               f"inplace operation: [{t.dtype.name} {list(t.shape)}] is at version "
                               f"{t._version}; expected version {version} instead")
        return self._saved_values()

    def _changed_in_place(self):
        """(tensor, the version saved) of the first saved tensor modified in place since, or None."""
        for ref, version in self._versions:
            t = ref()
            if t is not None and t._version != version:
                return t, version
        return None

    def _pack(self, hooks):
        """Hand the saved tensors to a saved_tensors_hooks pack hook (graph.py) and keep only what it gives."""
        pack, unpack = hooks
        self._hooked = (unpack, tuple([None if t is None else (pack(t),) for t in self._saved]))
        self._saved = ()

    def _saved_values(self):
        """The saved tensors, through the unpack hook where they were packed."""
        hooked = self._hooked
        if hooked is None:
            return self._saved
        unpack, packed = hooked
        return tuple([None if p is None else _unpacked(unpack(p[0])) for p in packed])

    def _attribute_count(self):
        """How many attributes this ctx holds now: the trace cache's mark before an op's build."""
        return len(self.__dict__)

    def _attributes_after(self, count):
        """The attributes set since `count` were held, in the order set (an instance dict keeps it), or None."""
        attributes = self.__dict__
        return dict(list(attributes.items())[count:]) if len(attributes) > count else None

    def _restore(self, attributes):
        """Set again what a build set (`_attributes_after`) when the trace cache replays that build."""
        self.__dict__.update(attributes)

    def _free(self):
        """Release what backward needed: saved tensors and the Function's own attributes."""
        needs = self.needs_input_grad
        self.__dict__.clear()
        self.needs_input_grad, self._freed = needs, True


def _unpacked(t):
    if not isinstance(t, Tensor):
        raise TypeError(f"Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                        f"{type(t).__name__}")
    return t


class Node:
    """A recorded application of a Function: the `grad_fn` of its outputs, a node of the backward graph.

    Attributes:
        fn: the Function class; ctx: its FunctionCtx.
        next_edges: per forward argument, where its gradient goes: a leaf Tensor (accumulate into
            `.grad`), a `(Node, output_index)` pair, or None.
        outputs: (shape, dtype, device) of every output, for zero gradients of unused outputs.
        retained: {output_index: weakref} of outputs that asked for `retain_grad()`.
        hooks: {output_index: {handle id: hook}} of `register_hook` on outputs (hooks.py).
    """

    __slots__ = ("fn", "ctx", "next_edges", "outputs", "retained", "hooks")

    def __init__(self, fn, ctx, next_edges, outputs):
        self.fn, self.ctx, self.next_edges, self.outputs = fn, ctx, next_edges, outputs
        self.retained = self.hooks = None

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
    # ggrad's own rules, whose backward is a function of ctx and the gradients: a recorded pass over them
    # may be replayed (backward_replay.py). A user's Function runs its backward every time.
    _replayable = False

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward(ctx, *args)")  # as PyTorch

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("a Function subclass must define backward(ctx, *grads) to be differentiated")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """PyTorch 2's split form: override it (with a forward without ctx) to fill ctx from the inputs
        and the output."""

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
    needs = tuple([isinstance(a, Tensor) and a.requires_grad for a in args])
    ctx = FunctionCtx(needs)
    if fn.primitive:
        out = fn.forward(ctx, *args, **kwargs) if kwargs else fn.forward(ctx, *args)
    else:
        out = _user_forward(fn, ctx, args, kwargs or {})
    if True not in needs or not grad_mode.is_grad_enabled():
        return out
    outputs = out if isinstance(out, tuple) else (out,)
    # where each input's gradient goes: its producer's node and output index, or the leaf itself
    edges = tuple([None if not need else a if a.grad_fn is None else (a.grad_fn, a._output_nr)
                   for a, need in zip(args, needs)])
    if fn.primitive:   # Tensors only, all differentiable
        skip = None
        specs = tuple([(o.shape, o.dtype, o.device) for o in outputs])
    else:
        outputs = _user_outputs(fn, ctx, args, outputs)
        out = outputs if isinstance(out, tuple) else outputs[0]
        skip = ctx._non_differentiable
        specs = tuple([(o.shape, o.dtype, o.device) if isinstance(o, Tensor) else ((), None, None) for o in outputs])
    node = Node(fn, ctx, edges, specs)
    hooks = current_hooks()
    if hooks is not None and ctx._saved:
        ctx._pack(hooks)
    for i, o in enumerate(outputs):
        if skip is not None and (not isinstance(o, Tensor) or any(o is s for s in skip)):
            continue
        if o.dtype.is_float:
            o.grad_fn = node
            o._output_nr = i
            o.requires_grad = True
    return out


def _user_forward(fn, ctx, args, kwargs):
    """A user Function's forward under no_grad: `forward(ctx, *args)`, or PyTorch 2's split form
    `forward(*args)` plus `setup_context(ctx, inputs, output)`."""
    with grad_mode.no_grad():
        if fn.setup_context is Function.setup_context:
            return fn.forward(ctx, *args, **kwargs)
        out = fn.forward(*args, **kwargs)
        fn.setup_context(ctx, args, out)
        return out


def _user_outputs(fn, ctx, args, outputs):
    """A user Function's outputs made ready to carry its node (other objects pass as they are, and
    their gradient is None): an input returned as it is becomes a new Tensor (so the input keeps its
    own history), and an output it saved is kept as an alias marked as that output (no reference
    cycle; create_graph hands it back with its history)."""
    outputs = list(outputs)
    for i, o in enumerate(outputs):
        if isinstance(o, Tensor) and any(o is a for a in args):
            fresh = alias(o)
            skip = ctx._non_differentiable
            if any(o is s for s in skip):
                ctx._non_differentiable = skip + (fresh,)
            outputs[i] = fresh
    saved = list(ctx._saved)
    marks = []
    for index, s in enumerate(saved):
        for nr, o in enumerate(outputs):
            if s is o:
                saved[index] = alias(o)
                marks.append((index, nr))
    if marks:
        ctx._saved = tuple(saved)
        ctx._saved_outputs = tuple(marks)
    return tuple(outputs)
