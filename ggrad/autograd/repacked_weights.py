"""Quantized weights kept twice on the CPU: as stored, and repacked for GGML's fast CPU kernels.

GGML's CPU backend multiplies q4_0 (and q4_K, iq4_nl, mxfp4, ...) weights fastest in an interleaved
layout that it cannot read back and that no op but `mul_mat` understands (`ggml.repack`). A weight marked
with `keep_repacked(w)` therefore keeps its own bytes (read by `numpy()`, `state_dict()`, exports,
embeddings and the input gradient) and gets a repacked copy that the forward product reads
(`twin_of`). The copy is remade when the weight changes (a new node or version: `copy_`,
`load_state_dict`) and not used off the CPU. The cost is the weight's bytes a second time, unless the weight
is a view of a memory-mapped GGUF file (`from_gguf` on the CPU): then its pages are given back to the kernel
once repacked (`raw.page_out`) and read from the file again only when something reads the weight itself.
"""

import weakref

from ..ggml.repack import repacked
from .memory import Block
from .raw import page_out, to_raw
from .tensor import Tensor

_marked = {}   # id(weight) -> [weakref to it, its node and version when repacked, the repacked Tensor]


def keep_repacked(w):
    """Mark the quantized 2-D CPU weight `w` to be multiplied through a repacked copy; True if GGML's
    CPU has a repacked layout for its type and shape (False: nothing changes)."""
    if not (isinstance(w, Tensor) and w.dtype.is_quantized and w.ndim == 2 and w.device.is_cpu):
        return False
    twin = _make_twin(w)
    if twin is None:
        return False
    key = id(w)
    _marked[key] = [weakref.ref(w, lambda _, key=key: _marked.pop(key, None)), w._node, w._version, twin]
    return True


def forget_repacked(w):
    """Drop `w`'s repacked copy (products read its own bytes again)."""
    entry = _marked.get(id(w))
    if entry is not None and entry[0]() is w:
        del _marked[id(w)]


def twin_of(w):
    """The repacked copy of weight `w` for a forward product, or None (not marked, or not on the CPU)."""
    entry = _marked.get(id(w))
    if entry is None or entry[0]() is not w or not w.device.is_cpu:
        return None
    if entry[1] is not w._node or entry[2] != w._version:   # changed since: repack its new bytes
        twin = _make_twin(w)
        if twin is None:
            return None
        entry[1:] = [w._node, w._version, twin]
    return entry[3]


def _make_twin(w):
    made = repacked(to_raw(w), w.dtype, tuple(reversed(w.shape)))
    if made is None:
        return None
    page_out(w)   # where w is a view of a mapped file, the repacked copy is the one held
    # a computed leaf of its own memory (Block without a pool: `made` frees it when the Tensor goes)
    return Tensor._make(made.tensor, w.shape, w.dtype, w.device, None, Block(made, None))

