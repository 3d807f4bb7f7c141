"""What a training step does besides recording ops, noted while `compile_step` records it (compiled_step.py).

A replayed step runs none of its Python, so everything the Python did that is not an op of the graph
is noted here as an *action* by the code that does it: the optimizer's step counts and hyper-parameters
(optim/optimizer.py), the GradScaler's scale, skip and update (amp/grad_scaler.py), dropout's masks
drawn on the host (factory.bernoulli_mask). At each replay the actions run again on the host, in the
order they were noted: `before()` (host state that precedes the compute, new values written into the
graph's input nodes), the compute, then `after()` (host state that follows from the results). `key()`
holds what the recorded graph depends on beside the inputs (a changed key records the step again);
`nodes` the upload nodes the action writes (any other upload must stay the same from call to call).

Code that cannot be replayed says so with `unsupported(reason)`: the step then runs eagerly.
"""

import contextlib
import contextvars

_notes = contextvars.ContextVar("ggrad_replay_notes", default=None)


class Action:
    """One thing the step's Python did, to do again at each replay (see the module's docstring)."""

    nodes = ()

    def key(self):
        return None

    def before(self):
        pass

    def after(self):
        pass


class Notes:
    """The actions noted while one call of a step recorded, and why it cannot be replayed, if so."""

    def __init__(self):
        self.actions = []
        self.unsupported = None


def active():
    """The Notes of the step being recorded in this thread, or None."""
    return _notes.get()


def note(action):
    """Note `action` (an Action) when a step is being recorded; returns it."""
    notes = _notes.get()
    if notes is not None:
        notes.actions.append(action)
    return action


def unsupported(reason):
    """The step being recorded (if any) cannot be replayed, for `reason` (said in the warning)."""
    notes = _notes.get()
    if notes is not None and notes.unsupported is None:
        notes.unsupported = reason


@contextlib.contextmanager
def recording():
    """`with recording() as notes:` notes the actions of the code run inside."""
    notes = Notes()
    token = _notes.set(notes)
    try:
        yield notes
    finally:
        _notes.reset(token)
