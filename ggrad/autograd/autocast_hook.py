"""The hook through which an autocast policy (`ggrad.amp`) reaches the ops whose dtypes it changes.

Autograd knows no policy: an op that autocast may change is decorated `@autocast_op("name")`, and
while a policy is installed (`install`) the call goes to `policy(name, fn, args, kwargs)`, which
decides the dtypes (the table lives in ggrad/amp/autocast.py). Without a policy the call goes straight
to the op. The policy lives in a ContextVar, as grad mode does, so threads each see their own.
"""

import contextlib
import contextvars
import functools

_policy = contextvars.ContextVar("ggrad_autocast_policy", default=None)
HOOKED = set()   # the names of the decorated ops (ggrad.amp checks its table covers exactly these)


def autocast_op(name):
    """Decorator: route calls of the op `name` through the installed autocast policy, if any."""
    def wrap(fn):
        HOOKED.add(name)

        @functools.wraps(fn)
        def hooked(*args, **kwargs):
            policy = _policy.get()
            if policy is None:
                return fn(*args, **kwargs)
            return policy(name, fn, args, kwargs)
        return hooked
    return wrap


def current():
    """The installed policy, or None."""
    return _policy.get()


@contextlib.contextmanager
def install(policy):
    """Within the block, hooked ops go through `policy` (None: straight to the op)."""
    token = _policy.set(policy)
    try:
        yield
    finally:
        _policy.reset(token)


def suspended():
    """A block in which hooked ops run as written: the inside of an autocast op, and backward rules."""
    return install(None)
