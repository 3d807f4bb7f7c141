"""Nodes computed by ggrad's own CPU kernels (C in ggrad/ggml/csrc, compiled into the cffi module), built
as GGML custom ops: the CPU backend runs them on its threads like any node. Other backends cannot run them
(an RPC server has no such function), so only graphs on the CPU backend may hold them.
"""

from ._lib import ffi, lib
from .ops import _check as C
from .ops import custom_4d
from .ops._check import tensor

__all__ = ["matmul_f32", "is_matmul_f32", "matmul_isa"]

ISAS = {"best": 0, "generic": 1, "avx2": 2, "avx512": 3}   # microkernels of matmul_f32 (csrc/matmul.c)
_ISA_NAMES = {v: k for k, v in ISAS.items()}
_MATMUL_F32 = ffi.addressof(lib, "ggrad_matmul_f32")
_MATMUL_F32_ADDRESS = ffi.cast("void *", _MATMUL_F32)


def matmul_f32(ctx, a, b):
    """`b @ a.T` batched over dims 2 and 3, as ops.mul_mat, for f32 operands read with any strides.

    a [k, n, q, r] and b [k, m, q*x, r*y] (a broadcast over b's batch dims) give f32 [n, m, q*x, r*y].
    Transposed and permuted views are read in place: no contiguous copy is needed, unlike mul_mat.

    Args:
        ctx: the Context the result is made in.
        a: f32 [k, n, q, r], any strides.
        b: f32 [k, m, q*x, r*y], any strides.
    """
    op = "matmul_f32"
    pa, pb = tensor(op, "a", a), tensor(op, "b", b)
    na, nb = C.ne(pa), C.ne(pb)
    if pa.type != C.F32 or pb.type != C.F32:
        raise C.DTypeError(f"{op}: a and b must be f32, got {C.tname(pa)} and {C.tname(pb)}")
    if na[0] != nb[0] or 0 in (na[2], na[3]) or nb[2] % na[2] or nb[3] % na[3]:
        C.fail(op, f"a ne={na} and b ne={nb} don't match (equal ne[0], b's batch dims multiples of a's)")
    return custom_4d(ctx, "f32", na[1], nb[1], nb[2], nb[3], [a, b], 2, _MATMUL_F32, -1)


def is_matmul_f32(node):
    """Whether the `struct ggml_tensor *` `node` is a matmul_f32 node (a custom op whose parameters begin
    with its function)."""
    return node.op == lib.GGML_OP_CUSTOM and ffi.cast("void **", node.op_params)[0] == _MATMUL_F32_ADDRESS


def matmul_isa(isa=None):
    """The instruction set matmul_f32's microkernel uses ("avx512", "avx2" or "generic"); with `isa`, use
    that one first ("best": the fastest this CPU has). An `isa` the CPU lacks leaves the choice as it was."""
    if isa is not None and isa not in ISAS:
        raise ValueError(f"matmul_isa: isa must be one of {sorted(ISAS)}, got {isa!r}")
    return _ISA_NAMES[lib.ggrad_matmul_kernel(ISAS[isa] if isa else -1)]


lib.ggrad_matmul_kernel(ISAS["best"])
