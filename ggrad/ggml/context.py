"""GGML contexts, tensors and graphs as Python objects that free their C memory deterministically.

A `Context` owns tensor metadata (and data when created with `no_alloc=False`); it frees it on
`close()`, on leaving a `with` block, or when garbage-collected. A `GTensor` keeps its context alive.
Shapes here are GGML's: `ne[0]` is the innermost dimension. `GTensor.shape` gives the numpy order.
"""

from ._lib import ffi, lib
from . import dtypes
from .errors import ArgumentError, GGMLError, ShapeError

_PRECISIONS = {"default": lib.GGML_PREC_DEFAULT, "f32": lib.GGML_PREC_F32}   # GTensor.set_prec

MAX_DIMS = lib.GGML_MAX_DIMS
_TENSOR_OVERHEAD = lib.ggml_tensor_overhead()
# The most tensors one op builder creates (conv/pool helpers make a few intermediates).
_OP_HEADROOM = 8


class Context:
    """A `ggml_context`.

    Args:
        n_tensors: how many tensors (and their metadata) it must hold.
        no_alloc: True to hold metadata only (data lives in backend buffers).
        mem_size: bytes to reserve instead of deriving them from `n_tensors`.
        graphs: room for this many graphs of `graph_size` nodes.
    """

    __slots__ = ("ptr", "mem_size", "no_alloc", "__weakref__")

    def __init__(self, n_tensors=1024, no_alloc=True, mem_size=None, graphs=0, graph_size=2048):
        if mem_size is None:
            mem_size = (n_tensors + _OP_HEADROOM) * _TENSOR_OVERHEAD
            mem_size += graphs * lib.ggml_graph_overhead_custom(graph_size, False)
        if mem_size <= 0:
            raise ValueError(f"Context: mem_size must be positive, got {mem_size}")
        params = ffi.new("struct ggml_init_params *", {"mem_size": mem_size, "mem_buffer": ffi.NULL,
                                                       "no_alloc": bool(no_alloc)})
        ptr = lib.ggml_init(params[0])
        if ptr == ffi.NULL:
            raise MemoryError(f"ggml_init could not reserve {mem_size} bytes")
        self.ptr = ffi.gc(ptr, lib.ggml_free, size=mem_size)
        self.mem_size = mem_size
        self.no_alloc = bool(no_alloc)

    def close(self):
        """Free the context now; tensors made in it must not be used afterwards."""
        if self.ptr is not None:
            ffi.release(self.ptr)
            self.ptr = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def used_mem(self):
        return int(lib.ggml_used_mem(self._live()))

    def _live(self):
        if self.ptr is None:
            raise GGMLError("this Context was closed")
        return self.ptr

    def check_room(self, op, extra_bytes=0):
        """Raise before GGML would abort because the context is full."""
        ptr = self._live()
        need = _OP_HEADROOM * _TENSOR_OVERHEAD + extra_bytes
        if lib.ggml_used_mem(ptr) + need > self.mem_size:
            raise GGMLError(f"{op}: the context is full ({self.mem_size} bytes); create it with more n_tensors")
        return ptr

    def new_tensor(self, dtype, ne, name=None):
        """A new leaf tensor of `dtype` with GGML dimensions `ne` (innermost first)."""
        dtype = dtypes.as_dtype(dtype)
        ne = tuple(int(n) for n in ne)
        if not 1 <= len(ne) <= MAX_DIMS:
            raise ShapeError(f"new_tensor: GGML tensors have 1 to {MAX_DIMS} dimensions, got ne={list(ne)}")
        if any(n < 0 for n in ne):
            raise ShapeError(f"new_tensor: negative dimension in ne={list(ne)}")
        if ne[0] % dtype.block_size:
            raise ShapeError(f"new_tensor: ne[0]={ne[0]} is not a multiple of {dtype.name}'s block size {dtype.block_size}")
        data_bytes = 0 if self.no_alloc else dtype.row_size(ne[0]) * _prod(ne[1:]) + 64
        ptr = self.check_room("new_tensor", data_bytes)
        arr = ffi.new("int64_t[]", ne)
        t = GTensor(lib.ggml_new_tensor(ptr, dtype.value, len(ne), arr), self)
        if name:
            t.name = name
        return t

    def like(self, tensor):
        """A new leaf tensor of `tensor`'s type and dimensions (strides packed), in one GGML call: the
        metadata of a computed result re-homed, or a stand-in over it (a step makes dozens)."""
        if not self.no_alloc:
            return self.new_tensor(tensor.dtype, tensor.ne)
        return GTensor(lib.ggml_dup_tensor(self.check_room("like"), tensor.ptr), self)

    def tensors(self):
        """Every tensor made in this context, in creation order."""
        ptr = self._live()
        t = lib.ggml_get_first_tensor(ptr)
        out = []
        while t != ffi.NULL:
            out.append(GTensor(t, self))
            t = lib.ggml_get_next_tensor(ptr, t)
        return out


_TYPE_SIZES = {}   # GGML type value -> (bytes per block, elements per block)


def _type_sizes(type_value):
    sizes = _TYPE_SIZES[type_value] = (int(lib.ggml_type_size(type_value)), int(lib.ggml_blck_size(type_value)))
    return sizes


def _prod(values):
    p = 1
    for v in values:
        p *= v
    return p


class GTensor:
    """A `struct ggml_tensor *` together with the Context that keeps it alive."""

    __slots__ = ("ptr", "ctx", "_packed", "_ne", "_nb", "_dtype", "_view")

    def __init__(self, ptr, ctx):
        if ptr == ffi.NULL:
            raise GGMLError("GGML returned no tensor")
        self.ptr = ptr
        self.ctx = ctx
        # read once: a tensor's type, dimensions and strides never change (a graph's build reads them
        # dozens of times a node)
        self._packed = self._ne = self._nb = self._dtype = self._view = None

    def _checked(self):
        """The tensor pointer, or GGMLError once its Context was closed (the memory is gone)."""
        ctx = self.ctx
        if ctx is not None and ctx.ptr is None:
            raise GGMLError("this tensor's Context was closed")
        return self.ptr

    @property
    def ne(self):
        """GGML dimensions, innermost first (always 4 values)."""
        ptr = self._checked()
        ne = self._ne
        if ne is None:
            ne = ptr.ne
            ne = self._ne = (ne[0], ne[1], ne[2], ne[3])
        return ne

    @property
    def nb(self):
        """Strides in bytes, innermost first."""
        ptr = self._checked()
        nb = self._nb
        if nb is None:
            nb = ptr.nb
            nb = self._nb = (nb[0], nb[1], nb[2], nb[3])
        return nb

    @property
    def shape(self):
        """Numpy-order shape, trailing GGML dimensions of size 1 dropped (GGML keeps no rank)."""
        return tuple(reversed(self.ne[:lib.ggml_n_dims(self.ptr)]))

    @property
    def dtype(self):
        ptr = self._checked()
        dtype = self._dtype
        if dtype is None:
            dtype = self._dtype = dtypes.from_value(ptr.type)
        return dtype

    @property
    def op(self):
        return ffi.string(lib.ggml_op_desc(self._checked())).decode()

    @property
    def nelements(self):
        return int(lib.ggml_nelements(self.ptr))

    @property
    def nbytes(self):
        return int(lib.ggml_nbytes(self.ptr))

    @property
    def is_contiguous(self):
        return bool(lib.ggml_is_contiguous(self.ptr))

    @property
    def is_packed(self):
        """Contiguous with the canonical strides of its shape, size-1 dimensions included: what GGML ops
        that check ggml_is_padded_1d or compare strides need (a contiguous view may have other strides on
        its size-1 dimensions). A tensor that is no view has them: GGML lays out every new tensor so
        (one field read instead of nine; nothing in ggrad writes strides). Kept after the first read: a
        replayed step asks again of the same nodes."""
        packed = self._packed
        if packed is None:
            packed = self._packed = self._read_packed()
        return packed

    def _read_packed(self):
        ptr = self.ptr
        if ptr.view_src == ffi.NULL:
            return True
        ne, nb = ptr.ne, ptr.nb
        size, block = _TYPE_SIZES.get(ptr.type) or _type_sizes(ptr.type)
        if nb[0] != size:
            return False
        expected = size * ne[0] // block
        if nb[1] != expected:
            return False
        expected *= ne[1]
        if nb[2] != expected:
            return False
        return nb[3] == expected * ne[2]

    @property
    def is_transposed(self):
        return bool(lib.ggml_is_transposed(self.ptr))

    @property
    def is_view(self):
        """True when this tensor shares the memory of another (ggml view, reshape, permute). Kept after the
        first read (a tensor's view source never changes; a step asks of each input node)."""
        view = self._view
        if view is None:
            view = self._view = self.ptr.view_src != ffi.NULL
        return view

    @property
    def is_leaf(self):
        """True for a tensor that no op computes (data set from outside)."""
        return self.ptr.op == lib.GGML_OP_NONE

    def write(self, raw):
        """Copy the bytes of the contiguous numpy array `raw` into this tensor's backend memory."""
        lib.ggml_backend_tensor_set(self.ptr, ffi.from_buffer("void *", raw), 0, raw.nbytes)

    @property
    def is_allocated(self):
        return self.ptr.buffer != ffi.NULL or self.ptr.data != ffi.NULL

    @property
    def location(self):
        """Where the data lies: (its backend buffer, its address). The address alone does not tell two tensors
        apart: Vulkan's buffers all start at one made-up address."""
        return (int(ffi.cast("uintptr_t", self.ptr.buffer)), int(ffi.cast("uintptr_t", self.ptr.data)))

    @property
    def name(self):
        return ffi.string(lib.ggml_get_name(self._checked())).decode()

    @name.setter
    def name(self, value):
        lib.ggml_set_name(self.ptr, str(value)[:63].encode())

    def set_input(self):
        lib.ggml_set_input(self.ptr)

    def set_output(self):
        lib.ggml_set_output(self.ptr)

    def set_param(self):
        """Flag this leaf as a parameter (GGML's optimizer ops update only those)."""
        if not self.is_leaf:   # GGML asserts it
            raise ShapeError(f"set_param: {self!r} is not a leaf (an op's result cannot be a parameter)")
        lib.ggml_set_param(self.ptr)

    def set_loss(self):
        """Flag this f32 scalar as a loss."""
        if self.dtype is not dtypes.f32 or self.nelements != 1:   # GGML asserts both
            raise ShapeError(f"set_loss: {self!r} is not an f32 scalar")
        lib.ggml_set_loss(self.ptr)

    def set_prec(self, prec):
        """How this mul_mat node sums its products (GGML's ggml_mul_mat_set_prec), returning the node: "f32"
        makes every backend sum in f32; with "default" GGML's CUDA and Vulkan products of f16 operands sum
        in f16 (the CPU's in f32)."""
        if prec not in _PRECISIONS:
            raise ArgumentError(f"set_prec: prec must be one of {sorted(_PRECISIONS)}, got {prec!r}")
        if self.ptr.op != lib.GGML_OP_MUL_MAT:   # GGML asserts it
            raise ShapeError(f"set_prec: {self!r} is not a node made by mul_mat")
        lib.ggml_mul_mat_set_prec(self.ptr, _PRECISIONS[prec])
        return self

    def src(self, i):
        s = self.ptr.src[i]
        return None if s == ffi.NULL else GTensor(s, self.ctx)

    def view_source(self):
        """The tensor whose memory this view shares (None for a tensor that is no view)."""
        s = self.ptr.view_src
        return None if s == ffi.NULL else GTensor(s, self.ctx)

    def __repr__(self):
        return f"GTensor({self.op}, {self.dtype.name}, ne={list(self.ne)}, name={self.name!r})"

    def __eq__(self, other):
        return isinstance(other, GTensor) and self.ptr == other.ptr

    def __hash__(self):
        return hash(int(ffi.cast("uintptr_t", self.ptr)))


class Graph:
    """A `ggml_cgraph` of up to `size` nodes, built in its own context."""

    __slots__ = ("ptr", "ctx", "size", "work")

    def __init__(self, size=2048, grads=False):
        if size < 1:
            raise ValueError(f"Graph: size must be positive, got {size}")
        self.ctx = Context(n_tensors=0, mem_size=lib.ggml_graph_overhead_custom(size, grads) + 1024)
        self.ptr = lib.ggml_new_graph_custom(self.ctx.ptr, size, grads)
        self.size = size
        self.work = None   # (n_nodes, compute estimate): kept by sched.Scheduler.compute to choose threads

    def build_forward_expand(self, tensor):
        """Add `tensor` and everything it depends on; raises if the graph would overflow."""
        needed = count_reachable(tensor.ptr, limit=self.size)
        if self.n_nodes + needed > self.size:
            raise GGMLError(f"build_forward_expand: graph of size {self.size} cannot hold {needed} more tensors")
        lib.ggml_build_forward_expand(self.ptr, tensor.ptr)

    def expand(self, tensor):
        """`build_forward_expand` without the overflow count, for callers that sized the graph to hold
        every tensor they add (counting costs a walk of the whole graph per call)."""
        lib.ggml_build_forward_expand(self.ptr, tensor.ptr)

    @property
    def n_nodes(self):
        return int(lib.ggml_graph_n_nodes(self.ptr))

    def node(self, i):
        n = self.n_nodes
        if not -n <= i < n:
            raise IndexError(f"graph has {n} nodes, index {i}")
        return GTensor(lib.ggml_graph_node(self.ptr, i), None)

    def nodes(self):
        return [self.node(i) for i in range(self.n_nodes)]


def count_reachable(ptr, limit):
    """Distinct tensors reachable from `ptr` through src, stopping once `limit` is exceeded."""
    seen = set()
    stack = [ptr]
    while stack and len(seen) <= limit:
        t = stack.pop()
        key = int(ffi.cast("uintptr_t", t))
        if key in seen:
            continue
        seen.add(key)
        for s in t.src:
            if s != ffi.NULL:
                stack.append(s)
    return len(seen)


def latest_source(ptr, places):
    """The largest value `places` (a dict keyed by tensor pointers) gives a source of `ptr`, looking through
    the sources it has none for; -1 when none has one."""
    latest, stack, seen = -1, [ptr], set()
    while stack:
        for src in stack.pop().src:
            if src == ffi.NULL:
                continue
            place = places.get(src)
            if place is not None:
                latest = max(latest, place)
            elif src not in seen:
                seen.add(src)
                stack.append(src)
    return latest


def tensor_overhead():
    """Bytes of metadata one tensor takes in a Context."""
    return _TENSOR_OVERHEAD
