"""The hook through which an autocast policy (`ggrad.amp`) reaches the ops whose dtypes it changes.

Autograd knows no policy: an op that autocast may change declares its class where it is written,
`@autocast_op("exp", FLOAT32)` (PyTorch's op lists: products run in the low precision, LOWER; the ops that
need range or precision in float32, FLOAT32; BANNED refuses), and while a policy is installed (`install`)
the call goes to `policy(name, fn, args, kwargs)`, which decides the dtypes from that class
(ggrad/amp/autocast.py). Without a policy the call goes straight to the op. The policy lives in a ContextVar, as grad mode does, so threads each see their own.
"""

import contextlib
import contextvars
import functools

_policy = contextvars.ContextVar("ggrad_autocast_policy", default=None)
LOWER, FLOAT32, BANNED = "lower", "float32", "banned"
CLASSES = {}   # op name -> (class, how many leading positional Tensors are cast (None: every float Tensor))


def autocast_op(name, kind, casts=None):
    """Decorator: the op `name` is of autocast class `kind` (its first `casts` positional Tensor arguments
    are cast; None: every floating point one); its calls go through the installed policy, if any."""
    def wrap(fn):
        CLASSES[name] = (kind, casts)

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
