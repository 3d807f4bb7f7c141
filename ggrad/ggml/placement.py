"""Where tensors' memory is: raw `struct ggml_tensor *` placement for reusing an allocated graph.

A graph computed again with the same nodes (the autograd layer's graph cache) keeps most of its memory
plan; these helpers list the tensors a plan placed, take tensors out of memory so that a new plan or
buffer places them, and move views after their source. They work on the `ptr` of GTensors.
"""

from ._lib import ffi, lib


def _each(contexts):
    """Pointers of every tensor of `contexts`, in creation order."""
    for c in contexts:
        p = lib.ggml_get_first_tensor(c.ptr)
        while p != ffi.NULL:
            yield p
            p = lib.ggml_get_next_tensor(c.ptr, p)


def unplaced(contexts):
    """Pointers of the tensors of `contexts` without memory yet, in creation order."""
    return [p for p in _each(contexts) if p.data == ffi.NULL]


def computed(contexts):
    """Pointers of the tensors of `contexts` that an op made (no leaves; views too) and that have memory: a
    graph computed before, to be planned again (views are placed again after their sources)."""
    return [p for p in _each(contexts) if p.data != ffi.NULL and p.op != lib.GGML_OP_NONE]


def placed(ptrs):
    """The pointers of `ptrs` that have memory now."""
    return [p for p in ptrs if p.data != ffi.NULL]


def unplace(ptrs):
    """Take the tensors of `ptrs` out of their memory (a scheduler or Buffer places them again)."""
    for p in ptrs:
        p.data = ffi.NULL
        p.buffer = ffi.NULL


def views_of(ptrs, sources):
    """The pointers of `ptrs` that are views of a tensor in `sources` (pointers)."""
    sources = set(sources)
    return [p for p in ptrs if p.view_src != ffi.NULL and p.view_src in sources]


def follow_sources(views):
    """Point each view of `views` into the current memory of its source."""
    for p in views:
        src = p.view_src
        p.data = ffi.cast("char *", src.data) + p.view_offs
        p.buffer = src.buffer


def bind(ptr, src):
    """Point tensor `ptr` at the memory of `src` (a packed tensor of the same type and dimensions), with
    what its buffer noted of that memory (`extra`: the CPU_REPACK layout, repack.py)."""
    ptr.data = src.data
    ptr.buffer = src.buffer
    ptr.extra = src.extra


def views_of_chain(contexts, sources):
    """Pointers of the tensors of `contexts` that are views, directly or through other views, of a
    tensor in `sources` (pointers), in creation order (a view comes after what it views)."""
    seen = set(sources)
    out = []
    for p in _each(contexts):
        if p.view_src != ffi.NULL and p.view_src in seen:
            out.append(p)
            seen.add(p)
    return out
