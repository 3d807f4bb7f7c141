"""Matrix products and triangular matrices: mul_mat, mul_mat_id, out_prod, solve_tri, tri, diag."""

from .._lib import lib
from . import _check as C
from ._check import make, tensor

__all__ = ["mul_mat", "mul_mat_id", "out_prod", "solve_tri", "tri", "diag"]

TRI_TYPES = {"upper_diag": lib.GGML_TRI_TYPE_UPPER_DIAG, "upper": lib.GGML_TRI_TYPE_UPPER,
             "lower_diag": lib.GGML_TRI_TYPE_LOWER_DIAG, "lower": lib.GGML_TRI_TYPE_LOWER}

_VEC_DOT = {}


def _vec_dot_type(t):
    """The type the CPU converts b to before a dot product with rows of type `t`."""
    if t not in _VEC_DOT:
        traits = lib.ggml_get_type_traits_cpu(t)
        _VEC_DOT[t] = traits.vec_dot_type if traits.vec_dot != C.ffi.NULL else None
    return _VEC_DOT[t]


def _matmul_types(op, pa, pb, aname="a"):
    ta = pa.type
    if ta != C.F32 or pb.type != C.F32:
        vdt = _vec_dot_type(ta)
        if vdt is None:
            raise C.DTypeError(f"{op}: {aname} has type {C.tname(ta)}, which has no dot product "
                               "(use a float or quantized type)")
        if pb.type != C.F32 and pb.type != vdt:
            allowed = "f32" if vdt == C.F32 else f"f32 or {C.tname(vdt)}"
            raise C.DTypeError(f"{op}: b has type {C.tname(pb)}; with {aname} of type {C.tname(ta)} it must be "
                               f"{allowed}")


def mul_mat(ctx, a, b):
    """Matrix product `b @ a.T` batched over dims 2 and 3: result ne [a.ne1, b.ne1, b.ne2, b.ne3], f32.

    GGML's convention: both operands hold rows of length k = ne[0]; a [k, n, q, r] and b [k, m, q*x, r*y]
    (a broadcast over b's batch dims) give [n, m, q*x, r*y]. In numpy order that is `b @ a.T`.

    Args:
        ctx: the Context the result is made in.
        a: [k, n, q, r], float or quantized, contiguous rows, not transposed.
        b: [k, m, q*x, r*y], f32 (or a's dot-product type), contiguous rows.
    """
    pa = tensor("mul_mat", "a", a)
    pb = tensor("mul_mat", "b", b)
    na = pa.ne
    nb = pb.ne
    a2, a3 = na[2], na[3]
    if na[0] != nb[0] or a2 == 0 or a3 == 0 or nb[2] % a2 or nb[3] % a3:
        _mismatch("mul_mat", pa, pb)
    sa, sb = pa.nb, pb.nb
    ta, tb = pa.type, pb.type
    if sa[0] > sa[1]:
        C.not_transposed("mul_mat", "a", pa)
    if ta != C.F32 or tb != C.F32:
        _matmul_types("mul_mat", pa, pb)
    if sa[0] != C.TYPE_SIZE[ta]:
        C.contiguous_rows("mul_mat", "a", pa)
    if sb[0] != C.TYPE_SIZE[tb]:
        C.fail("mul_mat", f"b (ne={C.ne(pb)}, nb={list(pb.nb)}) must have contiguous rows; use ops.cont")
    return make(ctx, "mul_mat", lib.ggml_mul_mat, pa, pb)


def _mismatch(op, pa, pb):
    na, nb = C.ne(pa), C.ne(pb)
    if na[0] != nb[0]:
        why = f"a.ne[0]={na[0]} != b.ne[0]={nb[0]}"
    else:
        why = f"b.ne[2]={nb[2]} and b.ne[3]={nb[3]} must be multiples of a.ne[2]={na[2]} and a.ne[3]={na[3]}"
    C.fail(op, f"a ne={na} and b ne={nb} don't match ({why})")


def mul_mat_id(ctx, as_, b, ids):
    """Indirect matrix product (mixture of experts): c[:, e, t] = as[:, :, ids[e, t]] @ b[:, e % b.ne1, t].

    Args:
        ctx: the Context the result is made in.
        as_: the experts' matrices [k, n, n_expert] (GGML's `as`), float or quantized, contiguous rows.
        b: inputs [k, n_b, n_tokens] (f32), n_b dividing ids.ne[0].
        ids: i32 expert indices [n_expert_used, n_tokens] (each in [0, n_expert)).
    """
    op = "mul_mat_id"
    pa = tensor(op, "as_", as_)
    pb = tensor(op, "b", b)
    pi = tensor(op, "ids", ids)
    C.types(op, "ids", pi, frozenset({C.I32}))
    if pa.nb[0] > pa.nb[1]:
        C.not_transposed(op, "as_", pa)
    na, nb, ni = C.ne(pa), C.ne(pb), C.ne(pi)
    if na[3] != 1 or nb[3] != 1 or ni[2] != 1 or ni[3] != 1:
        C.fail(op, f"as_ ne={na} and b ne={nb} must be 3-D and ids ne={ni} 2-D")
    if ni[1] != nb[2] or na[0] != nb[0] or not C.divides(nb[1], ni[0]):
        C.fail(op, f"as_ ne={na}, b ne={nb} and ids ne={ni} don't match (need as_.ne[0] == b.ne[0], "
                   "ids.ne[1] == b.ne[2] and ids.ne[0] a multiple of b.ne[1])")
    _matmul_types(op, pa, pb, "as_")
    C.contiguous_rows(op, "as_", pa)
    C.contiguous_rows(op, "b", pb)
    return make(ctx, op, lib.ggml_mul_mat_id, pa, pb, pi)


def out_prod(ctx, a, b):
    """Sum of outer products over rows: a [m, n, q, r] and b [p, n, q*x, r*y] give [m, p, q*x, r*y], f32.

    In numpy order (batch dims aside) that is `b.T @ a`: result[j, i] = sum_k a[k, i] * b[k, j].
    This is the gradient of mul_mat with respect to its first operand.

    Args:
        ctx: the Context the result is made in.
        a: [m, n, q, r]: f32 (or f16/quantized when a.ne[2:] == b.ne[2:]), contiguous rows, not transposed.
        b: [p, n, q*x, r*y], f32.
    """
    op = "out_prod"
    pa = tensor(op, "a", a)
    pb = tensor(op, "b", b)
    na, nb = pa.ne, pb.ne
    if na[1] != nb[1] or not C.divides(na[2], nb[2]) or not C.divides(na[3], nb[3]):
        C.fail(op, f"a ne={C.ne(pa)} and b ne={C.ne(pb)} don't match (need a.ne[1] == b.ne[1] and b.ne[2], "
                   "b.ne[3] multiples of a.ne[2], a.ne[3])")
    if pa.nb[0] > pa.nb[1]:
        C.not_transposed(op, "a", pa)
    C.types(op, "b", pb, C.ONLY_F32)
    if pa.type != C.F32:
        if pa.type != C.F16 and not C.is_quantized(pa.type):
            raise C.DTypeError(f"{op}: a has type {C.tname(pa)}, expected f32, f16 or quantized")
        if na[2] != nb[2] or na[3] != nb[3]:
            C.fail(op, f"with {C.tname(pa)} a, a ne={C.ne(pa)} and b ne={C.ne(pb)} need equal dims 2 and 3")
    if pa.nb[0] != lib.ggml_type_size(pa.type):
        C.contiguous_rows(op, "a", pa)
    return make(ctx, op, lib.ggml_out_prod, pa, pb)


def solve_tri(ctx, a, b, left, lower, uni):
    """Solves `a @ x = b` for x with a triangular `a` (numpy order), batched over dims 2 and 3.

    GGML 0.20.2 implements only left=True, lower=True, uni=False.

    Args:
        ctx: the Context the result is made in.
        a: contiguous f32 [n, n, q, r], lower triangular with a non-zero diagonal.
        b: contiguous f32 [m, n, q, r].
        left: must be True (solve a x = b rather than x a = b).
        lower: must be True (a is lower triangular).
        uni: must be False (use a's diagonal rather than assuming ones).
    """
    op = "solve_tri"
    pa = tensor(op, "a", a)
    pb = tensor(op, "b", b)
    C.types(op, "a", pa, C.ONLY_F32)
    C.types(op, "b", pb, C.ONLY_F32)
    na, nb = C.ne(pa), C.ne(pb)
    if na[0] != na[1] or na[1] != nb[1] or na[2:] != nb[2:]:
        C.fail(op, f"a ne={na} must be square and match b ne={nb} (a.ne[1] == b.ne[1], equal batch dims)")
    C.contiguous(op, "a", pa)
    C.contiguous(op, "b", pb)
    if not (left and lower and not uni):
        raise C.ArgumentError(f"{op}: GGML implements only left=True, lower=True, uni=False "
                         f"(got left={left}, lower={lower}, uni={uni})")
    return make(ctx, op, lib.ggml_solve_tri, pa, pb, True, True, False)


def tri(ctx, a, type):
    """Zeroes `a` outside a triangle of each matrix in dims 0 and 1.

    In numpy order: "lower_diag" is np.tril(a), "lower" np.tril(a, -1), "upper_diag" np.triu(a) and
    "upper" np.triu(a, 1).

    Args:
        ctx: the Context the result is made in.
        a: contiguous f32 tensor with a.ne[0] == a.ne[1].
        type: `enum ggml_tri_type` value or name: upper_diag, upper, lower_diag, lower.
    """
    pa = tensor("tri", "a", a)
    code = C.enum("tri", "type", type, TRI_TYPES)
    C.types("tri", "a", pa, C.ONLY_F32)
    C.contiguous("tri", "a", pa)
    if pa.ne[0] != pa.ne[1]:
        C.fail("tri", f"a ne={C.ne(pa)} must be square in dims 0 and 1")
    return make(ctx, "tri", lib.ggml_tri, pa, code)


def diag(ctx, a):
    """Diagonal matrices from rows: a [n, 1, q, r] gives [n, n, q, r] with a on the diagonal.

    Args:
        ctx: the Context the result is made in.
        a: f32 tensor with a.ne[1] == 1 and contiguous rows.
    """
    pa = tensor("diag", "a", a)
    C.types("diag", "a", pa, C.ONLY_F32)
    C.contiguous_rows("diag", "a", pa)
    if pa.ne[1] != 1:
        C.fail("diag", f"a ne={C.ne(pa)} must have ne[1] == 1")
    return make(ctx, "diag", lib.ggml_diag, pa)
