"""`compile_step(fn)`: a whole training step (forward, `backward()`, the optimizer's update) recorded once
and then replayed per call with new input values, no op recorded in Python (as CUDA graphs or TinyJit).

    @ggrad.compile_step
    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for x, y in batches:
        loss = train_step(x, y)      # a Tensor, as the eager step returns it

The graph cache (trace_cache.py) and the backward replay spare a repeated step its building and planning,
but its forward is still recorded op by op. A compiled step records its first calls eagerly and compares
them: once a call replays the previous call's cached trace to its end (the same events and keys), the
step is *verified* and later calls with arguments of the same kinds compute that graph again in a compute
buffer of its own (owned_graph.py), after writing into it what changes from step to step:
- the Tensor arguments' values (their shapes, dtypes and devices are part of the key; other arguments
  are constants of the recording, compared by value);
- what the step's Python does besides ops, noted by the code that does it (replay_notes.py): the
  optimizer's step counts and hyper-parameters (learning rate from a scheduler, bias corrections), the
  GradScaler's scale, skipped steps and growth, dropout's masks (drawn on the host from the default
  generator in the same order as the eager step: the same masks).
The step's results come back as new Tensors (the returned ones, each optimized parameter's `.grad`), and
the optimizer's and the scaler's Python state is what the eager step leaves, so `state_dict()`,
schedulers and checkpoints see no difference. Results are bitwise those of the eager steps.

Valid when the function records the same ops for arguments of the same kinds, and reads no state that
changes between calls other than what is noted above (a module's `training` flag, a global, a tensor the
step reads that is replaced rather than updated in place: call `reset()` after changing such state). The
optimizer's param_groups (but the learning rate), its parameters, their requires_grad and memory, the
grad mode and autocast are checked at every call: a change records again. A step that cannot be
replayed (another optimizer than SGD/Adam/AdamW's fused updates, a host read before the update, several
computes, ops recorded after the update, an input that changes and is not an argument) runs eagerly, as
the function would, with one warning that says why.
"""

import functools
import warnings
import weakref

import numpy as np

from .. import ggml
from . import autocast_hook, device_locks, execution, grad_mode, memory, replay_notes
from .factory import tensor
from .ops.host_index import hide_values
from .owned_graph import OwnedGraph
from .tensor import Tensor

MAX_REPLAYS = 2        # verified steps kept per compiled step (each holds its own compute buffer)
MAX_RECORDINGS = 4     # eager calls of one kind of arguments that may fail to verify before it stays eager
_PILE = 256            # Tensors made on a device between two replays past which its pending graph is computed


def compile_step(fn=None):
    """A `CompiledStep` of `fn` (also a decorator: `@ggrad.compile_step`)."""
    if fn is None:
        return compile_step
    if not callable(fn):
        raise TypeError(f"compile_step: expected a callable, got {type(fn).__name__}")
    return CompiledStep(fn)


class CompiledStep:
    """`fn` recorded once per kind of arguments and replayed (see the module's docstring).

    Attributes:
        records: eager calls that were recorded (and compared).
        replays: calls that were replayed.
    """

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)
        self.records = self.replays = 0
        self._replays = {}    # static key -> _Replay, most recently made last
        self._last = None     # the last recording that was not verified yet
        self._tries = {}      # static key -> recordings that did not verify
        self._eager = {}      # static key -> why it is not replayed
        self._warned = set()

    def reset(self):
        """Forget every recording (their compute buffers are freed): the next calls record again."""
        self._replays.clear()
        self._last = None
        self._tries.clear()
        self._eager.clear()

    def __call__(self, *args, **kwargs):
        leaves, static = _flatten((args, kwargs))
        static = (static, grad_mode.is_grad_enabled(), _autocast_key())
        try:
            replay = self._replays.get(static)
        except TypeError:   # an argument that cannot be compared by value: nothing to key a recording by
            self._warn("an argument is not hashable (pass Tensors, numbers, strings, tuples)", 3)
            return self.fn(*args, **kwargs)
        if replay is not None:
            if replay.keys == replay.current_keys():
                self.replays += 1
                return replay.run(leaves)
            del self._replays[static]   # the optimizer's groups or the scaler changed: record again
        if static in self._eager:
            return self.fn(*args, **kwargs)
        if any(t.requires_grad for t in leaves):   # its gradient would go to the recording's own input
            self._give_up(static, "an argument requires grad", 4)
            return self.fn(*args, **kwargs)
        return self._record(args, kwargs, leaves, static)

    # ---- recording -------------------------------------------------------------------------------
    def _record(self, args, kwargs, leaves, static):
        for rt in memory.all_runtimes():   # the step's graph holds the step alone (and host data)
            if _has_work(rt.graph):
                execution.realize(rt.graph)
        # the arguments' values enter as host data of the step's graph: a replay writes them there
        inputs = [_input_like(t) for t in leaves]
        for t in inputs:   # no op may build today's values into the graph (an index checked on the host)
            hide_values(t)
        # the nodes a replay writes, and the host data of the arguments themselves (not read by the step)
        input_nodes = [t._node for t in inputs] + [t._node for t in leaves if t._pending is not None]
        it = iter(inputs)
        args, kwargs = _replaced((args, kwargs), lambda: next(it))
        before = self._last
        reads = memory.stats.host_reads
        with replay_notes.recording() as notes, execution.capture() as captures:
            out = self.fn(*args, **kwargs)
        self.records += 1
        recording = _Recording(static, inputs, input_nodes, notes, captures, out, memory.stats.host_reads != reads)
        why = recording.problem()
        if why is None and before is not None and before.static == static:
            why = recording.verify(before)
            if why is None:
                self._last = None
                self._tries.pop(static, None)
                self._replays[static] = _Replay(recording)
                while len(self._replays) > MAX_REPLAYS:
                    del self._replays[next(iter(self._replays))]
                return out
        elif why is None:
            why = "not verified yet"
        self._last = recording if recording.problem() is None else None
        tries = self._tries[static] = self._tries.get(static, 0) + 1
        if recording.problem() is not None or tries >= MAX_RECORDINGS:
            self._give_up(static, recording.problem() or why)
        return out

    def _give_up(self, static, why, stacklevel=5):
        self._eager[static] = why
        self._warn(why, stacklevel)

    def _warn(self, why, stacklevel):
        """Warn once per reason, at the caller's line (`stacklevel` counted from here)."""
        if why not in self._warned:
            self._warned.add(why)
            warnings.warn(f"compile_step({getattr(self.fn, '__name__', 'step')}): runs eagerly: {why}",
                          RuntimeWarning, stacklevel=stacklevel)


class _Recording:
    """One recorded call: its inputs, notes, the compute it captured, and what its results are."""

    def __init__(self, static, inputs, input_nodes, notes, captures, out, read):
        self.static, self.inputs, self.notes, self.out = static, inputs, notes, out
        self.input_nodes, self.read = input_nodes, read
        self.capture = captures[0] if len(captures) == 1 else None
        self.ncaptures = len(captures)
        self.keys = tuple(a.key() for a in notes.actions)
        self.optimizers = [a.optimizer for a in notes.actions if hasattr(a, "stepped")]
        self._problem = self._check()

    def problem(self):
        return self._problem

    def _check(self):
        if self.notes.unsupported is not None:
            return self.notes.unsupported
        if self.ncaptures != 1:
            return (f"it computes {self.ncaptures} graphs a call (one is replayed: read values on the host only "
                    "after the optimizer's step)")
        capture = self.capture
        if capture.entry is None:
            return "its graph is not cached (graph cache off, or a graph of several scheduler splits)"
        device = capture.scheduler.device
        if not memory.runtime(device).graph.is_empty():
            return "it records ops after its compute (they would not be replayed)"
        # what Python holds of the step's results: its return value and the gradients
        self.device = device
        by_location = {}
        for node in capture.entry.outputs:
            by_location.setdefault(node.location, node)
        self.out_leaves, self.out_static = [], None
        try:
            out_leaves, self.out_static = _flatten(self.out, outputs=True)
        except TypeError as e:
            return str(e)
        self.out_specs = []
        for t in out_leaves:
            spec = _result_spec(t, by_location)
            if spec is None:
                return "it returns a Tensor it did not compute in its graph"
            self.out_specs.append(spec)
        self.out = None
        if self.read and _has_constants(self.out_static):
            return "it returns a Python number after reading values on the host (return the Tensor)"
        self.grads, self.result_blocks = [], [weakref.ref(t._block) for t in out_leaves]
        for opt in self.optimizers:
            for group in opt.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    spec = _result_spec(p.grad, by_location)
                    if spec is None:
                        return "a gradient is not a result of the step's graph"
                    self.grads.append((p, spec))
                    self.result_blocks.append(weakref.ref(p.grad._block))
        return None

    def verify(self, before):
        """Why this recording does not repeat `before`'s (None when it does: the step may be replayed)."""
        capture = self.capture
        if not capture.hit or capture.entry is not before.capture.entry:
            return "its calls record different ops"
        if self.out_static != before.out_static:
            return "it returns other Python values from call to call"
        if self.keys != before.keys or len(self.notes.actions) != len(before.notes.actions):
            return "its calls do different things besides ops"
        written = {id(n) for n in self.input_nodes} | {id(n) for a in self.notes.actions for n in a.nodes}
        last = {id(node): raw for node, raw in before.capture.uploads}
        for node, raw in capture.uploads:
            if id(node) in written:
                continue
            other = last.get(id(node))
            if other is None or other.tobytes() != raw.tobytes():
                return (f"a value of shape {tuple(reversed(node.ne))} uploaded by the step changes between calls and "
                        "is not one of its Tensor arguments (make it an argument)")
        earlier = {id(b) for b in (ref() for ref in before.result_blocks) if b is not None}
        if any(id(b) in earlier for b in capture.kept):   # alive, so the ids are theirs
            return "it reads results of its previous call (gradients not zeroed?)"
        return None


class _Replay:
    """A verified step: its graph in a compute buffer of its own, and how to feed and read it."""

    def __init__(self, recording):
        self.recording = recording
        self.device = recording.device
        self.keys = recording.keys
        self.actions = recording.notes.actions
        # the inputs are held (recording.inputs): their memory is where the graph reads them
        self.inputs = [(t._node, t.dtype) for t in recording.inputs]
        self.graph = OwnedGraph(recording.capture, self.device)
        self.out_specs, self.out_static = recording.out_specs, recording.out_static
        self.grads = recording.grads
        self.checks = recording.capture.checks

    def current_keys(self):
        return tuple(a.key() for a in self.actions)

    def run(self, leaves):
        device = self.device
        with device_locks.lock_of(device):
            pending = memory.runtime(device).graph
            # what is pending may read results this compute overwrites; and the arguments' host data piles up
            # in a graph no step computes (each a node and a trace event): computed now and then
            if len(pending.tensors) > _PILE or _has_work(pending):
                execution.realize(device)
            for p, _ in self.grads:
                p.grad = None   # replaced below: not moved out of the buffer for nothing
            for action in self.actions:
                action.before()
            for (node, dtype), t in zip(self.inputs, leaves):
                _write_input(node, dtype, t)
            self.graph.compute()
            for node, error in self.checks:   # the graph's own checks (indices of its inputs), as eager raises them
                if ggml.get_data(node, (1,))[0] != 0:
                    raise error
            specs = self.out_specs + [spec for _, spec in self.grads]
            results = self.graph.results(specs)
            for (p, _), g in zip(self.grads, results[len(self.out_specs):]):
                p.grad = g
            for action in self.actions:
                action.after()
        it = iter(results)
        return _rebuilt(self.out_static, lambda: next(it))


# ---- helpers -----------------------------------------------------------------------------------------
def _autocast_key():
    policy = autocast_hook.current()
    if policy is None:
        return None
    return (type(policy), getattr(policy, "device_type", None), getattr(policy, "dtype", None),
            getattr(policy, "cache", None) is not None)


def _flatten(value, outputs=False):
    """(Tensors of `value`, its structure with the Tensors' kinds in their places) for args (tuples, lists,
    dicts of Tensors and other values) or, with `outputs`, a step's result (Tensors, None, numbers: the
    numbers are constants of the recording; TypeError else)."""
    leaves = []

    def walk(v):
        if isinstance(v, Tensor):
            leaves.append(v)
            return (Tensor, v.shape, v.dtype, v.device.name)
        if isinstance(v, (tuple, list)):
            return (type(v), tuple(walk(x) for x in v))
        if isinstance(v, dict):
            return (dict, tuple((k, walk(x)) for k, x in v.items()))
        if outputs and v is not None and type(v) not in (bool, int, float, str):
            raise TypeError(f"it returns a {type(v).__name__} (a replayed step returns Tensors and numbers)")
        if isinstance(v, np.ndarray):
            return (np.ndarray, v.shape, str(v.dtype), v.tobytes())
        return v
    return leaves, walk(value)


def _has_constants(static):
    """Whether a step's result structure (a static of _flatten) holds numbers besides its Tensors."""
    if isinstance(static, tuple) and static:
        if static[0] is Tensor:
            return False
        if static[0] in (tuple, list):
            return any(_has_constants(x) for x in static[1])
        if static[0] is dict:
            return any(_has_constants(x) for _, x in static[1])
    return static is not None


def _replaced(value, next_tensor):
    """`value` (args) with each Tensor replaced by `next_tensor()`."""
    if isinstance(value, Tensor):
        return next_tensor()
    if isinstance(value, (tuple, list)):
        return type(value)(_replaced(x, next_tensor) for x in value)
    if isinstance(value, dict):
        return {k: _replaced(x, next_tensor) for k, x in value.items()}
    return value


def _rebuilt(static, next_tensor):
    """The value whose structure _flatten gave as `static`, with each Tensor from `next_tensor()`."""
    if isinstance(static, tuple) and static:
        kind = static[0]
        if kind is Tensor:
            return next_tensor()
        if kind is tuple or kind is list:
            return kind(_rebuilt(x, next_tensor) for x in static[1])
        if kind is dict:
            return {k: _rebuilt(x, next_tensor) for k, x in static[1]}
    return static


def _input_like(t):
    """A new Tensor of t's values as host data of the next graph: the node a replay writes its input into.
    (Host data still to upload is read as it is: a read would compute it, a graph of its own.)"""
    values = t._pending.host_value(t) if t._pending is not None else None
    if values is None:
        values = t.detach().numpy()
    return tensor(values, dtype=t.dtype, device=t.device)


def _write_input(node, dtype, t):
    """Write Tensor t's values into a replayed graph's input node."""
    if t._pending is None and t._block is not None and t._node.is_contiguous and not t._node.is_view \
            and t._node.dtype is node.dtype:
        ggml.copy_tensor(t._node, node)   # computed on the device: copied there
        return
    raw = t._pending.host_bytes(t) if t._pending is not None else None
    if raw is None:
        raw = ggml.encode(t.detach().numpy(), dtype)
    node.write(raw)


def _result_spec(t, by_location):
    """(graph node, shape, dtype) of Tensor t, a result of the captured compute still where it made it, or None."""
    if t._pending is not None or t._block is None or t._block.pool is not None:
        return None
    node = by_location.get(t._node.location)
    if node is None or node.dtype is not t._node.dtype or node.nbytes != t._node.nbytes:
        return None
    return (node, t.shape, t.dtype)


def _has_work(graph):
    """Whether a pending graph holds more than host data (ops, updates) that must be computed first."""
    if graph.in_place_updates:
        return True
    for ref in graph.tensors:
        t = ref()
        if t is not None and t._pending is graph and not t._node.is_leaf:
            return True
    return False
