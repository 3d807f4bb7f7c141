"""The backward pass: walk the recorded graph in reverse topological order, emitting gradient nodes.

One pass serves `backward()` (gradients accumulate into the leaves' `.grad`) and `autograd.grad()`
(the gradients of chosen tensors are returned and no `.grad` is touched; nodes that lead to none of
them are skipped). Tensor hooks run on each tensor's summed gradient, as PyTorch's: a non-leaf's when
its node is reached, a leaf's once the last node feeding it has run.
"""

import numpy as np

from . import anomaly_mode, autocast_hook, backward_replay, device_locks, grad_mode, hooks
from .tensor import Tensor
from .factory import ones_like, zeros
from .function import FREED_GRAPH, Function
from .recording import alias


def _topological(roots):
    """Nodes reachable from `roots`, each after every node that feeds it a gradient (explicit stack)."""
    order, seen = [], set()
    for root in roots:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, iter(root.next_edges))]
        while stack:
            node, edges = stack[-1]
            for edge in edges:
                if isinstance(edge, tuple) and id(edge[0]) not in seen:
                    seen.add(id(edge[0]))
                    stack.append((edge[0], iter(edge[0].next_edges)))
                    break
            else:
                stack.pop()
                order.append(node)
    order.reverse()
    return order


def accumulate_leaf(leaf, grad):
    """Add `grad` into `leaf.grad` (gradients accumulate across backward calls, as in PyTorch)."""
    if grad.shape != leaf.shape:
        raise RuntimeError(f"gradient of shape {grad.shape} for a tensor of shape {leaf.shape}")
    if grad.dtype != leaf.dtype:
        grad = grad.to(leaf.dtype)
    leaf.grad = _own(grad) if leaf.grad is None else leaf.grad + grad


def _own(grad):
    """`grad` as a Tensor object of its own for a `.grad`: one gradient often reaches several leaves (both
    operands of an add, LSTM's bias_ih and bias_hh) and must not be one object there (or a view of one
    storage), or an in-place change of one `.grad` (clip_grad_norm_'s mul_) would change the others;
    PyTorch's gradients never share storage either. Values and history stay."""
    own = alias(grad)
    own.grad_fn, own._output_nr, own.requires_grad = grad.grad_fn, grad._output_nr, grad.requires_grad
    return own


def backward(tensor, gradient=None, retain_graph=False, create_graph=False):
    """Compute d tensor / d leaves and accumulate into each leaf's `.grad`."""
    if not tensor.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if gradient is None:
        if tensor.numel() != 1:
            raise RuntimeError(f"grad can be implicitly created only for scalar outputs; got shape "
                               f"{tensor.shape}: pass gradient= to backward()")
        if tensor.grad_fn is not None and not retain_graph and not create_graph:
            _loss_backward(tensor)
            return
        gradient = ones_like(tensor)
    elif not isinstance(gradient, Tensor):
        raise TypeError(f"backward: gradient must be a Tensor, got {type(gradient).__name__}")
    elif gradient.shape != tensor.shape:
        raise RuntimeError(f"backward: gradient shape {gradient.shape} does not match tensor shape {tensor.shape}")
    execute([(tensor, gradient)], retain_graph, create_graph)


def _loss_backward(loss):
    """`loss.backward()`: the recorded pass where the graph cache replays one for this graph
    (backward_replay.py), else the pass as written, recorded where it qualifies. A pass being recorded
    holds its device's lock throughout, so that no other thread's ops land among its events."""
    with device_locks.lock_of(loss.device):
        trace = backward_replay.trace_of(loss)
        if trace is not None:
            order = _topological([loss.grad_fn])
            if backward_replay.replay(loss, order, trace):
                return
            recorder = backward_replay.Recorder(loss, order, trace)
            if recorder.trace is not None:
                execute([(loss, ones_like(loss))], False, False)
                recorder.finish()
                return
    execute([(loss, ones_like(loss))], False, False)


def execute(roots, retain_graph, create_graph, targets=None):
    """Backpropagate each `(tensor, gradient)` of `roots` (tensors that require grad).

    targets None: accumulate into every leaf's `.grad`. Otherwise a list of tensors: return their
    gradients (None where none arrived), touching no `.grad`.
    """
    with grad_mode.set_grad_enabled(create_graph), autocast_hook.suspended():   # rules run as written
        return _Pass(targets).run(roots, retain_graph, create_graph)


class _Pass:
    """The bookkeeping of one backward pass."""

    def __init__(self, targets):
        self.targets = targets
        self.check_nan = anomaly_mode.is_anomaly_check_nan_enabled()
        self.buffered = {}   # id(leaf) -> [leaf, summed gradient]: leaves with hooks, or targets
        if targets is None:
            return
        self.captured = [None] * len(targets)
        self.leaf_targets, self.node_targets = {}, {}
        for i, t in enumerate(targets):
            if t.grad_fn is None:
                self.leaf_targets.setdefault(id(t), []).append(i)
            else:
                self.node_targets.setdefault((id(t.grad_fn), t._output_nr), []).append(i)
        self.capturing = {node_id for node_id, _ in self.node_targets}

    def run(self, roots, retain_graph, create_graph):
        pending, nodes = {}, []
        for tensor, grad in roots:
            if tensor.grad_fn is None:
                self._deliver(tensor, grad)
                continue
            node = tensor.grad_fn
            slot = pending.get(id(node))
            if slot is None:
                slot = pending[id(node)] = [None] * node.n_outputs
                nodes.append(node)
            nr = tensor._output_nr
            slot[nr] = grad if slot[nr] is None else slot[nr] + grad
        order = _topological(nodes)
        needed = self._needed(order) if self.targets is not None else None
        flush_after = self._flush_points(order) if self.targets is not None or hooks.leaf_table else {}
        for i, node in enumerate(order):
            grads = pending.pop(id(node), None)
            if grads is not None:
                self._visit(node, grads, pending, needed, retain_graph, create_graph)
            for leaf_id in flush_after.get(i, ()):
                self._flush(leaf_id)
        for leaf_id in list(self.buffered):   # leaf roots
            self._flush(leaf_id)
        return self.captured if self.targets is not None else None

    def _visit(self, node, grads, pending, needed, retain_graph, create_graph):
        if needed is not None and id(node) not in needed and id(node) not in self.capturing:
            return   # leads to no target: not run, its tensors' hooks not called (as PyTorch)
        grads = [_as_output_dtype(g, out) for g, out in zip(grads, node.outputs)]
        if node.hooks:
            grads = hooks.run_node_hooks(node, grads)
        _retain(node, grads)
        if needed is not None:
            if id(node) in self.capturing:
                for nr, g in enumerate(grads):
                    for i in self.node_targets.get((id(node), nr), ()):
                        self.captured[i] = g
            if id(node) not in needed:
                return
        if node.freed:
            raise RuntimeError(FREED_GRAPH)
        if node.n_outputs > 1 and None in grads and node.ctx._materialize:
            grads = [g if g is not None or dtype is None else zeros(shape, dtype=dtype, device=device)
                     for g, (shape, dtype, device) in zip(grads, node.outputs)]
        result = _gradients(node, grads, create_graph)
        if not isinstance(result, tuple):
            result = (result,)
        if not node.fn.primitive:
            result = _checked_user_gradients(node, result)
        elif len(result) < len(node.next_edges):
            raise RuntimeError(f"function {node.name}Backward returned an incorrect number of gradients "
                               f"(expected {len(node.next_edges)}, got {len(result)})")
        if self.check_nan:
            _check_nan(node, result)
        for edge, grad in zip(node.next_edges, result):
            if edge is None or grad is None:
                continue
            if isinstance(edge, tuple):
                target, nr = edge
                slot = pending.setdefault(id(target), [None] * target.n_outputs)
                slot[nr] = grad if slot[nr] is None else slot[nr] + grad
            else:
                self._deliver(edge, grad)
        if not retain_graph:
            node.ctx._free()

    def _deliver(self, leaf, grad):
        """A gradient arriving at a leaf: buffered when it has hooks or is a target, else accumulated."""
        if self.targets is not None:
            if id(leaf) not in self.leaf_targets:
                return
        elif not hooks.leaf_table or hooks.leaf_hooks(leaf) is None:
            accumulate_leaf(leaf, grad.detach() if not grad_mode.is_grad_enabled() else grad)
            return
        slot = self.buffered.get(id(leaf))
        if slot is None:
            self.buffered[id(leaf)] = [leaf, grad]
        else:
            slot[1] = slot[1] + grad

    def _flush(self, leaf_id):
        """The summed gradient of a leaf: its hooks, then capture (grad) or accumulation (backward)."""
        slot = self.buffered.pop(leaf_id, None)
        if slot is None:
            return
        leaf, grad = slot
        entry = hooks.leaf_hooks(leaf)
        if entry is not None and entry.pre:
            grad = hooks.run_hooks(entry.pre, grad)
        if self.targets is not None:
            for i in self.leaf_targets[leaf_id]:
                self.captured[i] = grad
            return
        accumulate_leaf(leaf, grad.detach() if not grad_mode.is_grad_enabled() else grad)
        if entry is not None:
            for hook in tuple(entry.post.values()):
                hook(leaf)

    def _needed(self, order):
        """Ids of the nodes from which a target is reached (the others need not run)."""
        needed = set()
        for node in reversed(order):
            for edge in node.next_edges:
                if edge is None:
                    continue
                if isinstance(edge, tuple):
                    if id(edge[0]) in needed or (id(edge[0]), edge[1]) in self.node_targets:
                        needed.add(id(node))
                        break
                elif id(edge) in self.leaf_targets:
                    needed.add(id(node))
                    break
        return needed

    def _flush_points(self, order):
        """{position in order: ids of the buffered leaves whose last feeding node is there}."""
        last = {}
        for i, node in enumerate(order):
            for edge in node.next_edges:
                if edge is not None and not isinstance(edge, tuple):
                    if self.targets is not None or hooks.leaf_hooks(edge) is not None:
                        last[id(edge)] = i
        points = {}
        for leaf_id, i in last.items():
            points.setdefault(i, []).append(leaf_id)
        return points


def _gradients(node, grads, create_graph):
    """node's rule on `grads`. With create_graph, outputs the rule saved are handed to it with their
    history (as PyTorch's saved outputs), so that the gradients it builds differentiate through them."""
    ctx = node.ctx
    saved_outputs = ctx._saved_outputs if create_graph else None
    try:
        if not saved_outputs:
            return node.fn.gradients(ctx, grads)
        saved, hooked = ctx._saved, ctx._hooked
        with_history = list(ctx._saved_values())   # packed ones unpacked (graph.py)
        for index, nr in saved_outputs:
            t = alias(with_history[index])
            t.grad_fn, t._output_nr, t.requires_grad = node, nr, True
            with_history[index] = t
        ctx._saved, ctx._hooked = tuple(with_history), None
        try:
            return node.fn.gradients(ctx, grads)
        finally:
            ctx._saved, ctx._hooked = saved, hooked
    except NotImplementedError:
        if node.fn.primitive and node.fn.backward is Function.backward:
            doc = (node.fn.__doc__ or "").strip().split("\n")[0]
            raise RuntimeError(f"{node.name} has no gradient rule: it is a backward op ({doc}), so a gradient "
                               f"computed through it with create_graph=True cannot be differentiated again"
                               ) from None
        raise


def _checked_user_gradients(node, result):
    """A user Function's gradients checked as PyTorch checks them: one per forward input (extra Nones
    allowed), each of its input's shape, or of a shape that input broadcasts to (then summed down)."""
    expected = len(node.next_edges)
    if len(result) > expected and all(g is None for g in result[expected:]):
        result = result[:expected]
    if len(result) != expected:
        raise RuntimeError(f"function {node.name}Backward returned an incorrect number of gradients "
                           f"(expected {expected}, got {len(result)})")
    checked = []
    for i, (edge, grad) in enumerate(zip(node.next_edges, result)):
        if edge is not None and grad is not None:
            shape = edge[0].outputs[edge[1]][0] if isinstance(edge, tuple) else edge.shape
            if grad.shape != shape:
                if not _expandable(shape, grad.shape):
                    raise RuntimeError(f"Function {node.name}Backward returned an invalid gradient at index {i} - "
                                       f"got {list(grad.shape)} but expected shape compatible with {list(shape)}")
                grad = grad.sum_to_size(shape)
        checked.append(grad)
    return tuple(checked)


def _check_nan(node, result):
    """Anomaly mode: raise naming the node if a gradient it returned holds nan (reads the values)."""
    for i, grad in enumerate(result):
        if grad is not None and grad.dtype.is_float and np.isnan(grad.numpy()).any():
            raise RuntimeError(f"Function '{node.name}Backward' returned nan values in its {i}th output.")


def _expandable(shape, target):
    """Whether `shape` broadcasts to `target`."""
    if len(shape) > len(target):
        return False
    return all(n == 1 or n == m for n, m in zip(reversed(shape), reversed(target)))


def _as_output_dtype(grad, output):
    """A gradient in its tensor's dtype (as PyTorch's): a float32 product's gradient of a float16 tensor
    is cast to float16, so that every rule sees gradients of its outputs' dtypes."""
    dtype = output[1]
    return grad if grad is None or grad.dtype is dtype or not dtype.is_float else grad.to(dtype)


def _retain(node, grads):
    if node.retained:
        for nr, ref in node.retained.items():
            t = ref()
            if t is not None and grads[nr] is not None:
                t.grad = _own(grads[nr]) if t.grad is None else t.grad + grads[nr]
