"""The bad-input family, run as a child process: every public function of ggrad's functional API and of
nn.functional, and every public Tensor method, that PyTorch also has, is called with the same bad arguments
on both sides (None, a str, a list of str, mismatched shapes, empty tensors, integer tensors, dims out of
range, None or a str where a number goes, a float where an int goes, float index tensors, bad keyword
values, sizes whose product overflows int64, a slice with both ends past the tensor) and with
valid arguments whose first compute fails in the plan, the upload or the compute (failed_compute_child.py):
read again, the result must have the values of a call without the failure. One JSON line per call: what
PyTorch did and what ggrad did.

    python bad_input_family.py OUT_FILE START   (cases from index START on; the parent restarts after a crash)

A line {"start": i} is flushed before each call, so a call that kills the process is named by it.
"""

import inspect
import json
import os
import resource
import signal
import sys
import warnings

import numpy as np
import torch
import torch.nn.functional as TF

import ggrad
import ggrad.autograd.ops as ops
import ggrad.nn.functional as GF
from ggrad.autograd import trace_cache
from ggrad.autograd.raw import to_raw
from failed_compute_child import Injected, disarm, fail_once

X = np.arange(6, dtype=np.float32).reshape(2, 3) / 7 + 0.1
INTS = np.arange(6, dtype=np.int32).reshape(2, 3)

# (name, builder): the builder gets a `make` that turns a numpy array into the framework's tensor
ARGUMENTS = [
    ("none", lambda t: ((None,), {})),
    ("str", lambda t: (("abc",), {})),
    ("list_of_str", lambda t: ((["a", "b"],), {})),
    ("valid", lambda t: ((t(X),), {})),
    ("mismatched_shapes", lambda t: ((t(X), t(np.ones(4, np.float32))), {})),
    ("empty_1d", lambda t: ((t(np.zeros(0, np.float32)),), {})),
    ("empty_2d", lambda t: ((t(np.zeros((0, 3), np.float32)),), {})),
    ("empty_pair", lambda t: ((t(np.zeros((0, 3), np.float32)), t(np.zeros((0, 3), np.float32))), {})),
    ("int_tensor", lambda t: ((t(INTS),), {})),
    ("int_pair", lambda t: ((t(INTS), t(INTS)), {})),
    ("dim_out_of_range", lambda t: ((t(X), 5), {})),
    ("negative_dim_out_of_range", lambda t: ((t(X), -4), {})),
    ("dim_kw_out_of_range", lambda t: ((t(X),), {"dim": 5})),
    ("none_argument", lambda t: ((t(X), None), {})),
    ("str_argument", lambda t: ((t(X), "abc"), {})),
    ("list_of_str_argument", lambda t: ((t(X), ["a", "b"]), {})),
    ("list_input", lambda t: (([1.0, 2.0],), {})),
    ("float_dim", lambda t: ((t(X), 1.5), {})),
    ("float_index", lambda t: ((t(X), 0, t(np.array([0.0, 1.0], np.float32))), {})),
    ("dim_kw_str", lambda t: ((t(X),), {"dim": "x"})),
    ("dtype_kw_bad", lambda t: ((t(X),), {"dtype": "bogus"})),
    ("keepdim_kw_str", lambda t: ((t(X),), {"keepdim": "yes"})),
    ("overflowing_sizes", lambda t: ((t(X), 2**40, 2**40), {})),
    ("zero_size_slice", lambda t: ((t(X)[5:9],), {})),
]
# Valid arguments, the first compute failing in a phase (the values read after it are compared with a call's
# without the failure)
FAILING = {"failure_in_plan": "plan", "failure_in_upload": "upload", "failure_in_compute": "compute"}
ARGUMENTS += [(name, lambda t: ((t(X),), {})) for name in FAILING]
# Kinds not called in torch: overflowing sizes (its pools never return for them: max_pool1d(x, 2**40, 2**40)
# hangs in C++) and the failing computes (compared with ggrad's own call without the failure)
TORCH_SKIPPED = {"overflowing_sizes", *FAILING}

# Methods that only print, copy out or change global state: nothing to compare.
SKIP_METHODS = {"backward", "register_hook", "numpy", "tolist", "item", "cpu", "to", "type", "retain_grad",
                "data_ptr", "element_size", "dim", "numel", "nelement", "size", "stride", "is_contiguous",
                "storage_offset", "untyped_storage", "share_memory_", "pin_memory", "cuda", "apply_",
                "map_", "detach_", "requires_grad_", "zero_", "record_stream"}


def _torch_target(name, functional):
    if functional:
        return getattr(TF, name, None)
    return getattr(torch, name, None) or getattr(TF, name, None)


def targets():
    """(label, ggrad callable, torch callable, is_method) for every name both frameworks have."""
    out = []
    for name in sorted(ops.__all__):
        theirs = _torch_target(name, False)
        if callable(getattr(ggrad, name, None)) and callable(theirs):
            out.append((f"ggrad.{name}", getattr(ggrad, name), theirs, False))
    for name in sorted(GF.__all__):
        theirs = _torch_target(name, True)
        ours = inspect.unwrap(getattr(GF, name))
        if callable(theirs) and ours is not inspect.unwrap(getattr(ops, name, len)):   # only nn.functional's own
            out.append((f"nn.functional.{name}", getattr(GF, name), theirs, False))
    for name in sorted(dir(ggrad.Tensor)):
        if name.startswith("_") or name in SKIP_METHODS:
            continue
        if callable(getattr(ggrad.Tensor, name)) and callable(getattr(torch.Tensor, name, None)):
            out.append((f"Tensor.{name}", name, name, True))
    return out


def _abort(*args, **kwargs):
    os.abort()


def cases(selftest=False):
    """Every (target, arguments) pair. `selftest` (GGRAD_FAMILY_SELFTEST=abort in the child): two calls that
    abort, then a few ordinary ones: the parent's own test that a killed child is reported and the family
    goes on."""
    if selftest:
        return ([("selftest.abort", _abort, lambda *a, **k: None, False, name, build) for name, build in
                 ARGUMENTS[:2]] + [t + a for t in targets()[:2] for a in ARGUMENTS])
    return [t + a for t in targets() for a in ARGUMENTS]


def _call(fn, method, args, kwargs):
    if method:
        if not args or args[0] is None or isinstance(args[0], (str, list)):
            return "skip"            # a method needs a tensor to be called on
        return getattr(args[0], fn)(*args[1:], **kwargs)
    return fn(*args, **kwargs)


def _outcome(fn, method, build, make):
    try:
        args, kwargs = build(make)
        result = _call(fn, method, args, kwargs)
        if result == "skip" if isinstance(result, str) else False:
            return {"kind": "skip"}
        if isinstance(result, ggrad.Tensor):
            result.numpy() if result.dtype.numpy is not None else None   # compute it: errors surface here
        return {"kind": "ok"}
    except Exception as e:   # noqa: BLE001  (the point is to see every type)
        return {"kind": "raised", "types": [c.__name__ for c in type(e).__mro__], "message": str(e)[:300]}


def _values(result):
    """The bytes of every Tensor in `result` (a Tensor or nested tuples and lists of them), others' repr."""
    if isinstance(result, (tuple, list)):
        return [_values(r) for r in result]
    if isinstance(result, ggrad.Tensor):
        data = to_raw(result) if result.dtype.numpy is None else result.numpy()   # quantized: its blocks
        return data.tobytes() + repr((result.shape, result.dtype)).encode()
    return repr(result)


def _rolled_back(fn, method, build, make, phase):
    """The call with valid arguments, its first compute failing in `phase` and its result read again:
    "ok" where the values read are a call's without the failure, "differs" where they are not (and whether
    the failure `fired`: a call computed before its read has no compute left to fail), or the error the
    call raised. Both calls draw from the same seed (random ops)."""
    cached = trace_cache.ENABLED
    ggrad.set_graph_cache(phase != "plan")   # a replayed graph is not planned again
    try:
        ggrad.manual_seed(0)
        args, kwargs = build(make)
        expected = _call(fn, method, args, kwargs)
        if isinstance(expected, str) and expected == "skip":
            return {"kind": "skip"}
        expected = _values(expected)
        ggrad.manual_seed(0)
        args, kwargs = build(make)
        result = _call(fn, method, args, kwargs)
        fail_once(phase)
        fired = False
        try:
            values = _values(result)
        except Injected:
            fired = True
            values = _values(result)
        finally:
            disarm()
        return {"kind": "ok" if values == expected else "differs", "fired": fired}
    except Exception as e:   # noqa: BLE001  (the point is to see every type)
        return {"kind": "raised", "types": [c.__name__ for c in type(e).__mro__], "message": str(e)[:300]}
    finally:
        ggrad.set_graph_cache(cached)


def _timeout(signum, frame):
    raise TimeoutError("the call did not return within 20 s")


def main(out_path, start):
    resource.setrlimit(resource.RLIMIT_AS, (16 << 30, 16 << 30))   # a huge size fails to allocate, never pages
    warnings.simplefilter("ignore")
    ggrad.ggml.hooks.set_log_level("none")
    signal.signal(signal.SIGALRM, _timeout)
    all_cases = cases(os.environ.get("GGRAD_FAMILY_SELFTEST") == "abort")
    with open(out_path, "a") as out:
        for i in range(start, len(all_cases)):
            label, ours, theirs, method, arg_name, build = all_cases[i]
            out.write(json.dumps({"start": i, "label": label, "args": arg_name}) + "\n")
            out.flush()
            theirs_result = {"kind": "skip"} if arg_name in TORCH_SKIPPED else \
                _outcome(theirs, method, build, lambda a: torch.tensor(a))
            signal.alarm(20)
            try:
                if arg_name in FAILING:
                    ours_result = _rolled_back(ours, method, build, lambda a: ggrad.tensor(a), FAILING[arg_name])
                else:
                    ours_result = _outcome(ours, method, build, lambda a: ggrad.tensor(a))
            finally:
                signal.alarm(0)
            out.write(json.dumps({"done": i, "label": label, "args": arg_name, "torch": theirs_result,
                                  "ggrad": ours_result}) + "\n")
            out.flush()
    return len(all_cases)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
