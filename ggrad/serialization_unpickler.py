"""Weights-only loading: a pickle read without Python's unpickler, calling nothing but allowed globals.

`ggrad.load(f)` (weights_only=True by default, as PyTorch's) reads the pickle of a whole-object save with
the interpreter below: `pickletools.genops` parses the opcodes (nothing runs), and the interpreter builds
numbers, strings and containers itself. A global (a class or function named in the file) is taken only
from the allowlist -- OrderedDict, set, ggrad's dtypes and devices, and what `add_safe_globals` or
`safe_globals` added -- and is never imported. A refused global raises `pickle.UnpicklingError` naming it
and the way to allow it. `ggrad.load(f, weights_only=False)` is the explicit opt-in to Python's unpickler.
"""

from __future__ import annotations

import collections
import contextlib
import pickle
import pickletools
from typing import Any, Callable, Iterator

from .autograd import torch_dtypes
from .ggml import backend, dtypes

__all__ = ["add_safe_globals", "clear_safe_globals", "get_safe_globals", "safe_globals", "unsafe_globals",
           "weights_only_load"]

# what a checkpoint of plain data and modules' bookkeeping names; all build values, none runs code
_DEFAULT_GLOBALS = [collections.OrderedDict, collections.Counter, set, frozenset, bytearray, complex, slice, range,
                    dtypes.from_name, torch_dtypes.resolve, backend.device]
_user_globals: list[Any] = []


def _name(entry):
    """The `module.qualname` under which a pickle names an allowlist entry (an object or (object, name))."""
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], str):
            raise TypeError(f"a safe global is an object or an (object, 'module.name') pair, got {entry!r}")
        return entry[1], entry[0]
    module, qualname = getattr(entry, "__module__", None), getattr(entry, "__qualname__", None)
    if module is None or qualname is None:
        raise TypeError(f"safe global {entry!r} has no __module__/__qualname__; pass (obj, 'module.name')")
    return f"{module}.{qualname}", entry


def add_safe_globals(safe_globals: list[Any]) -> None:
    """Allow the classes and functions `safe_globals` (objects or (object, "module.name") pairs) in
    weights-only loads, for this process (PyTorch's torch.serialization.add_safe_globals)."""
    for entry in safe_globals:
        _name(entry)   # refuse a bad entry now, not at the next load
    _user_globals.extend(safe_globals)


def get_safe_globals() -> list[Any]:
    """What `add_safe_globals` allowed (ggrad's own defaults not listed, as in PyTorch)."""
    return list(_user_globals)


def clear_safe_globals() -> None:
    """Forget what `add_safe_globals` allowed."""
    _user_globals.clear()


@contextlib.contextmanager
def safe_globals(safe_globals: list[Any]) -> Iterator[None]:
    """Within the block, weights-only loads also allow `safe_globals` (torch.serialization.safe_globals)."""
    saved = list(_user_globals)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        _user_globals[:] = saved


def _allowed():
    return dict(_name(entry) for entry in _DEFAULT_GLOBALS + _user_globals)


def _refuse(what, name):
    raise pickle.UnpicklingError(
        f"ggrad.load: weights-only load of {name} failed: {what}. If you trust the file, allow the class or "
        "function with ggrad.serialization.add_safe_globals([...]) or the safe_globals([...]) context manager, "
        "or load with weights_only=False (which runs Python's unpickler: only for files you trust)")


def unsafe_globals(data: bytes) -> list[str]:
    """The `module.qualname` of every global the pickle `data` names that weights-only loading would refuse,
    in order of appearance (read with genops, nothing run: the strings STACK_GLOBAL takes are followed through
    the memo)."""
    allowed = _allowed()
    pushed, memo, names = [None], {}, {}
    for op, arg, _ in pickletools.genops(data):
        code = op.name
        if code == "MEMOIZE":
            memo[len(memo)] = pushed[-1]
        elif code in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[arg] = pushed[-1]
        elif code in ("BINGET", "LONG_BINGET", "GET"):
            pushed.append(memo.get(arg))
        elif code in ("GLOBAL", "INST", "STACK_GLOBAL"):
            names[arg.replace(" ", ".") if code != "STACK_GLOBAL" else f"{pushed[-2]}.{pushed[-1]}"] = True
            pushed.append(None)
        elif code not in ("PROTO", "FRAME"):
            pushed.append(arg if isinstance(arg, str) else None)
    return [n for n in names if n not in allowed]


def weights_only_load(data: bytes, persistent_load: Callable[[Any], Any], name: str) -> Any:
    """The object the pickle `data` holds, built by the interpreter below; `persistent_load` gives the
    tensors stored beside it. Raises pickle.UnpicklingError for a global not allowed or an opcode
    outside what protocols 2-5 write for data and objects."""
    allowed = _allowed()
    by_identity = {id(obj) for obj in allowed.values()}
    stack, marks, memo = [], [], {}

    def pop_mark():
        if not marks:
            _refuse("a MARK is missing (a damaged file)", name)
        start = marks.pop()
        items = stack[start:]
        del stack[start:]
        return items

    def global_(full):
        if full not in allowed:
            _refuse(f"global {full} is not allowed", name)
        return allowed[full]

    try:
        for op, arg, _ in pickletools.genops(data):
            code = op.name
            if code in ("PROTO", "FRAME"):
                continue
            if code == "STOP":
                return stack.pop()
            if code in _CONSTANTS:
                stack.append(_CONSTANTS[code])
            elif code in _LITERALS:
                stack.append(bytearray(arg) if code == "BYTEARRAY8" else arg)
            elif code == "MARK":
                marks.append(len(stack))
            elif code == "POP":
                stack.pop()
            elif code == "POP_MARK":
                pop_mark()
            elif code == "DUP":
                stack.append(stack[-1])
            elif code == "EMPTY_LIST":
                stack.append([])
            elif code == "EMPTY_DICT":
                stack.append({})
            elif code == "EMPTY_SET":
                stack.append(set())
            elif code == "EMPTY_TUPLE":
                stack.append(())
            elif code in ("TUPLE1", "TUPLE2", "TUPLE3"):
                n = int(code[-1])
                items = tuple(stack[-n:])
                del stack[-n:]
                stack.append(items)
            elif code == "TUPLE":
                stack.append(tuple(pop_mark()))
            elif code == "LIST":
                stack.append(pop_mark())
            elif code == "DICT":
                items = pop_mark()
                stack.append(dict(zip(items[::2], items[1::2])))
            elif code == "FROZENSET":
                stack.append(frozenset(pop_mark()))
            elif code == "APPEND":
                value = stack.pop()
                _extend(stack[-1], [value], allowed, name)
            elif code == "APPENDS":
                items = pop_mark()
                _extend(stack[-1], items, allowed, name)
            elif code == "SETITEM":
                value, key = stack.pop(), stack.pop()
                _setitems(stack[-1], [key, value], allowed, name)
            elif code == "SETITEMS":
                items = pop_mark()
                _setitems(stack[-1], items, allowed, name)
            elif code == "ADDITEMS":
                items = pop_mark()
                if not isinstance(stack[-1], set):
                    _refuse(f"ADDITEMS to a {type(stack[-1]).__name__}", name)
                stack[-1].update(items)
            elif code in ("MEMOIZE", "BINPUT", "LONG_BINPUT", "PUT"):
                memo[len(memo) if code == "MEMOIZE" else arg] = stack[-1]
            elif code in ("BINGET", "LONG_BINGET", "GET"):
                if arg not in memo:
                    _refuse(f"memo entry {arg} is missing (a damaged file)", name)
                stack.append(memo[arg])
            elif code == "GLOBAL":
                stack.append(global_(arg.replace(" ", ".")))
            elif code == "STACK_GLOBAL":
                qualname, module = stack.pop(), stack.pop()
                if not isinstance(module, str) or not isinstance(qualname, str):
                    _refuse("STACK_GLOBAL of non-strings", name)
                stack.append(global_(f"{module}.{qualname}"))
            elif code == "REDUCE":
                args, func = stack.pop(), stack.pop()
                if id(func) not in by_identity or not isinstance(args, tuple):
                    _refuse(f"REDUCE calls {func!r:.80}, which is not an allowed global", name)
                stack.append(func(*args))
            elif code in ("NEWOBJ", "NEWOBJ_EX"):
                kwargs = stack.pop() if code == "NEWOBJ_EX" else {}
                args, cls = stack.pop(), stack.pop()
                if id(cls) not in by_identity or not isinstance(cls, type) or not isinstance(args, tuple) \
                        or not isinstance(kwargs, dict):
                    _refuse(f"{code} makes {cls!r:.80}, which is not an allowed class", name)
                stack.append(cls.__new__(cls, *args, **kwargs))
            elif code == "BUILD":
                state = stack.pop()
                _build(stack[-1], state, allowed, name)
            elif code == "BINPERSID":
                stack.append(persistent_load(stack.pop()))
            else:
                _refuse(f"opcode {code} is not read by weights-only loading", name)
    except IndexError:
        _refuse("the opcode stack ran out (a damaged file)", name)
    except (ValueError, TypeError, AttributeError, KeyError) as e:   # genops: a truncated opcode; a bad state
        raise pickle.UnpicklingError(f"ggrad.load: {name} is corrupt ({type(e).__name__}: {e})") from e
    _refuse("the pickle has no STOP (a damaged file)", name)


_CONSTANTS = {"NONE": None, "NEWTRUE": True, "NEWFALSE": False}
_LITERALS = {"BININT", "BININT1", "BININT2", "LONG1", "LONG4", "BINFLOAT", "BINUNICODE", "SHORT_BINUNICODE",
             "BINUNICODE8", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8"}


def _is_allowed_instance(obj, allowed):
    return not isinstance(obj, type) and any(type(obj) is cls for cls in allowed.values())


def _extend(target, items, allowed, name):
    if type(target) is list:
        target.extend(items)
    elif _is_allowed_instance(target, allowed):
        for item in items:
            target.append(item)
    else:
        _refuse(f"APPENDS to a {type(target).__name__}", name)


def _setitems(target, items, allowed, name):
    if type(target) is not dict and not _is_allowed_instance(target, allowed):
        _refuse(f"SETITEMS on a {type(target).__name__}", name)
    for key, value in zip(items[::2], items[1::2]):
        target[key] = value


def _build(inst, state, allowed, name):
    """Set the state of an instance of an allowed class, as pickle's BUILD does (never of a class itself)."""
    if not _is_allowed_instance(inst, allowed):
        _refuse(f"BUILD sets the state of a {type(inst).__name__}, which is not an allowed class", name)
    setstate = getattr(inst, "__setstate__", None)
    if setstate is not None:
        setstate(state)
        return
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    if state:
        inst.__dict__.update(state)
    for key, value in (slots or {}).items():
        setattr(inst, key, value)
