"""einsum: Einstein summation lowered to permute, sum and one batched matmul per pair of operands.

Each pair is contracted as (batch, free_a, contracted) @ (batch, contracted, free_b); labels of one
operand that appear nowhere else are summed first. More than two operands contract left to right.
Ellipsis ('...') and size-1 broadcasting are supported; a label repeated within one operand (diagonals,
traces such as 'ii->i') takes that operand's diagonal first. Intermediates beyond GGML's 4 dimensions are
refused with a ShapeError.
"""

import string

from ...ggml.errors import ArgumentError, ShapeError
from ..tensor import Tensor
from .indexing import diagonal
from .products import matmul
from .reduce import sum as _sum
from .views import expand, permute, reshape
from .view_primitives import prod
from ..declaration import declare
from ..arguments import kinds

_ELLIPSIS_LABELS = "0123456789"   # stand-ins for the dimensions an ellipsis covers


def _parse(equation, operands):
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): the first argument must be the equation (a str), got {type(equation).__name__}")
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum(): {equation!r} names {len(terms)} operands but {len(operands)} were given")
    most = 0
    for term, op in zip(terms, operands):
        if "..." in term:
            most = max(most, op.ndim - (len(term) - 3))
    inputs = []
    for term, op in zip(terms, operands):
        inputs.append(_expand(term, op, most, equation))
    if arrow:
        output = _expand(rhs, None, most, equation) if "..." in rhs else rhs
        for label in output:
            if not any(label in t for t in inputs):
                raise ValueError(f"einsum(): output label {label!r} of {equation!r} appears in no operand")
        if len(set(output)) != len(output):
            raise ValueError(f"einsum(): output labels of {equation!r} repeat")
    else:
        seen = "".join(inputs)
        output = _ELLIPSIS_LABELS[:most] + "".join(sorted(c for c in set(seen) if seen.count(c) == 1
                                                           and c not in _ELLIPSIS_LABELS))
    return inputs, output


def _expand(term, op, most, equation):
    if term.count("...") > 1:
        raise ArgumentError(f"einsum(): more than one ellipsis in {term!r} of {equation!r}")   # PyTorch's type
    head, dots, tail = term.partition("...")
    for c in head + tail:
        if c not in string.ascii_letters:
            raise ValueError(f"einsum(): invalid subscript {c!r} in {equation!r} (letters and '...' only)")
    if dots:
        k = most if op is None else op.ndim - len(head) - len(tail)
        if k < 0:
            raise ValueError(f"einsum(): {term!r} has more labels than the operand has dimensions ({op.shape})")
        term = head + _ELLIPSIS_LABELS[most - k:most] + tail
    if op is not None:
        if len(term) != op.ndim:
            raise ValueError(f"einsum(): {term!r} in {equation!r} has {len(term)} labels for an operand of "
                             f"{op.ndim} dimensions (shape {op.shape})")
    return term


def _diagonals(t, term, equation):
    """t with every label repeated within its term taken on the diagonal (`ii->i`, traces `ii->`), as
    (tensor, term with each label once): diagonal() moves the diagonal to the end, a view."""
    while len(set(term)) != len(term):
        c = next(c for c in term if term.count(c) > 1)
        i = term.index(c)
        j = term.index(c, i + 1)
        if t.shape[i] != t.shape[j]:
            raise ShapeError(f"einsum(): the repeated label {c!r} of {equation!r} has sizes {t.shape[i]} and "
                             f"{t.shape[j]}")
        t = diagonal(t, 0, i, j)
        term = term[:i] + term[i + 1:j] + term[j + 1:] + c
    return t, term


def _sizes(inputs, operands, equation):
    sizes = {}
    for term, op in zip(inputs, operands):
        for label, n in zip(term, op.shape):
            have = sizes.get(label, n)
            if n != have and 1 not in (n, have):
                raise ShapeError(f"einsum(): label {label!r} of {equation!r} has sizes {have} and {n}")
            sizes[label] = n if have == 1 else have
    return sizes


def _sum_out(t, term, keep):
    """t with the labels of `term` that are not in `keep` summed away."""
    gone = [i for i, c in enumerate(term) if c not in keep]
    if not gone:
        return t, term
    return _sum(t, tuple(gone)), "".join(c for c in term if c in keep)


def _pair(a, la, b, lb, keep, sizes):
    """The contraction of a (labels la) and b (lb) keeping the labels in `keep`, as (tensor, labels)."""
    a, la = _sum_out(a, la, keep + lb)
    b, lb = _sum_out(b, lb, keep + la)
    batch = [c for c in la if c in lb and c in keep]
    contracted = [c for c in la if c in lb and c not in keep]
    free_a = [c for c in la if c not in lb]
    free_b = [c for c in lb if c not in la]
    shape = tuple(sizes[c] for c in batch + free_a + free_b)
    if not contracted:   # an outer or elementwise product: broadcasting, no matmul
        ones_a, ones_b = (1,) * len(free_a), (1,) * len(free_b)
        left = reshape(permute(a, [la.index(c) for c in batch + free_a]), shape[:len(batch + free_a)] + ones_b)
        right = reshape(permute(b, [lb.index(c) for c in batch + free_b]),
                        shape[:len(batch)] + ones_a + shape[len(batch + free_a):])
        return left * right, "".join(batch + free_a + free_b)
    n_batch, m, k, n = (prod(sizes[c] for c in group) for group in (batch, free_a, contracted, free_b))
    left = reshape(permute(a, [la.index(c) for c in batch + free_a + contracted]).contiguous(), n_batch, m, k)
    right = reshape(permute(b, [lb.index(c) for c in batch + contracted + free_b]).contiguous(), n_batch, k, n)
    return reshape(matmul(left, right), shape), "".join(batch + free_a + free_b)


@kinds(equation=None)
@declare()
def einsum(equation, *operands):
    """Sums of products of the operands' entries over the labels the output leaves out, as PyTorch."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError("einsum(): must specify the equation string and at least one operand")
    if not all(isinstance(t, Tensor) for t in operands):
        raise TypeError("einsum(): operands must be Tensors")
    inputs, output = _parse(equation, operands)
    operands, inputs = zip(*(_diagonals(t, term, equation) for t, term in zip(operands, inputs)))
    inputs = list(inputs)
    sizes = _sizes(inputs, operands, equation)
    tensors = [expand(t, tuple(sizes[c] for c in term)) for t, term in zip(operands, inputs)]
    t, labels = tensors[0], inputs[0]
    for i in range(1, len(tensors)):
        later = output + "".join(inputs[i + 1:])
        t, labels = _pair(t, labels, tensors[i], inputs[i], later, sizes)
    t, labels = _sum_out(t, labels, output)
    if labels != output:
        t = permute(t, [labels.index(c) for c in output])
    return t
