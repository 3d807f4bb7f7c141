"""Tensors of more than 4 dimensions, GGML's limit, by folding adjacent dimensions.

A Tensor of any rank keeps its logical (numpy-order) shape; its GGML node holds the same elements in row-major
order with the leading dimensions merged (`pending.ne_of`: ne = (s[-1], s[-2], s[-3], prod(s[:-3]))). Ops that
only see the elements in order (unary ops, same-shape binary ops, reshape, reductions over the last dimension)
work on that node as they are. The ops below, which read the dimensions, are lowered here as sequences of
reshapes and <=4-D ops, so that autograd differentiates them through those ops:

- merge adjacent dimensions that move together (a permute's groups, a broadcast's expanded and kept runs, a
  slice's untouched inner dimensions); when the merged rank is <=4, one <=4-D op does it;
- a permute whose groups do not fit is a sequence of moves of one group (two merged blocks swapped: a 4-D
  permute and a copy each);
- a reduction, a concat, a roll or a scan along one dimension folds the dimensions before and after it; a batch
  matmul folds its batch dimensions into one; repeat tiles through an expand of (1, s0, 1, s1, ...).

Every result ends with a Reshape to its logical shape, so the node of a >4-D Tensor always has the folded
layout. An expand whose expanded and kept runs alternate more than 4 times repeats one dimension at a time.
What cannot be folded (a write into a slice cut in more than 4 blocks) raises a RuntimeError naming the op and
the shapes. <=4-D code never comes here (the callers test the rank first).
"""

from .broadcast import Expand, SumTo
from .concat import Concat
from .view_primitives import Permute, Reshape, Slice, SliceScatter

MAX_DIMS = 4


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _reshape(x, shape):
    shape = tuple(shape)
    return x if x.shape == shape else Reshape.apply(x, shape)


def _runs(patterns, sizes):
    """Group adjacent dimensions whose `patterns` are equal (dimensions of size 1 join any group): a list of
    lists of dimension indices."""
    groups, current = [], None
    for d, (p, n) in enumerate(zip(patterns, sizes)):
        if groups and (n == 1 or p == current):
            groups[-1].append(d)
            continue
        if groups and all(sizes[i] == 1 for i in groups[-1]):   # a run of size-1 dims takes the next pattern
            groups[-1].append(d)
            current = p
            continue
        groups.append([d])
        current = p
    return groups


def _merged(shape, groups):
    return tuple(_prod(shape[i] for i in g) for g in groups)


# ---- movement ----------------------------------------------------------------------------------
def permute(x, perm):
    """x permuted by `perm` (output dim i is input dim perm[i]), as <=4-D permutes and copies."""
    groups = []   # runs of input dims that stay adjacent and in order in the output
    for p in perm:
        if groups and groups[-1][-1] + 1 == p:
            groups[-1].append(p)
        else:
            groups.append([p])
    out_shape = tuple(x.shape[p] for p in perm)
    order = sorted(range(len(groups)), key=lambda i: groups[i][0])   # the groups in input order
    in_groups = [groups[i] for i in order]
    sizes = [_prod(x.shape[d] for d in g) for g in in_groups]
    target = [order.index(i) for i in range(len(groups))]   # output group i is input group target[i]
    if len(groups) <= MAX_DIMS:
        merged = Permute.apply(_reshape(x, sizes), tuple(target))
        return _reshape(merged, out_shape)
    current = list(range(len(groups)))   # labels of input groups, in the order the data holds them
    y = _reshape(x, sizes)
    for j, want in enumerate(target):
        i = current.index(want)
        if i == j:
            continue
        cur = [sizes[c] for c in current]
        block = (_prod(cur[:j]), _prod(cur[j:i]), cur[i], _prod(cur[i + 1:]))
        y = Permute.apply(_reshape(y, block), (0, 2, 1, 3))
        current.insert(j, current.pop(i))
    return _reshape(y, out_shape)


def expand(x, src, shape):
    """x (of shape `src` padded with leading 1s) repeated to `shape` (a copy)."""
    if tuple(src) == tuple(shape):
        return _reshape(x, shape)
    groups = _runs([s == n for s, n in zip(src, shape)], shape)
    if len(groups) <= MAX_DIMS:
        merged = Expand.apply(_reshape(x, _merged(src, groups)), _merged(shape, groups))
        return _reshape(merged, shape)
    out, now = _reshape(x, src), list(src)   # expanded and kept runs alternate: one dimension at a time
    for d, n in enumerate(shape):
        if now[d] != n:
            now[d] = n
            out = expand(out, out.shape, tuple(now))
    return out


def broadcast_apply(apply, a, b, out_shape, op):
    """`apply(a', b')` on a and b folded jointly to <=4 dimensions of the broadcast `out_shape`."""
    n = len(out_shape)
    pa, pb = (1,) * (n - a.ndim) + a.shape, (1,) * (n - b.ndim) + b.shape
    groups = _runs([(s == o, t == o) for s, t, o in zip(pa, pb, out_shape)], out_shape)
    if len(groups) > MAX_DIMS:   # the operands' runs alternate: both repeated to the result's shape
        return apply(expand(a, pa, out_shape), expand(b, pb, out_shape))
    out = apply(_reshape(a, _merged(pa, groups)), _reshape(b, _merged(pb, groups)))
    return _reshape(out, out_shape)


def slice_(x, starts, stops):
    """x[starts[0]:stops[0], ...] (unit steps) through <=4-D slices of merged dimensions."""
    shape = x.shape
    sliced = [d for d in range(len(shape)) if (starts[d], stops[d]) != (0, shape[d])]
    if len(sliced) > MAX_DIMS - 1:   # a first pass over three of them, then the rest
        first = sliced[:MAX_DIMS - 1]
        mid_starts = tuple(starts[d] if d in first else 0 for d in range(len(shape)))
        mid_stops = tuple(stops[d] if d in first else shape[d] for d in range(len(shape)))
        y = slice_(x, mid_starts, mid_stops)
        return slice_(y, tuple(s - m for s, m in zip(starts, mid_starts)), tuple(
            e - m for e, m in zip(stops, mid_starts)))
    groups = []   # each group: [size, start, stop]; an untouched dimension merges into the one before it
    for d, n in enumerate(shape):
        if groups and d not in sliced:
            g = groups[-1]
            g[0], g[1], g[2] = g[0] * n, g[1] * n, g[2] * n
        else:
            groups.append([n, starts[d], stops[d]])
    merged = Slice.apply(_reshape(x, [g[0] for g in groups]), tuple(g[1] for g in groups),
                            tuple(g[2] for g in groups))
    return _reshape(merged, tuple(b - a for a, b in zip(starts, stops)))


def slice_scatter(x, y, starts):
    """x with y written at offset `starts` (a write into a slice of a >4-D tensor), on merged dimensions."""
    groups = []   # [x size, y size, start] per group; a dimension y covers whole merges into the one before
    for d, (n, m) in enumerate(zip(x.shape, y.shape)):
        if groups and n == m:
            g = groups[-1]
            g[0], g[1], g[2] = g[0] * n, g[1] * n, g[2] * n
        else:
            groups.append([n, m, starts[d]])
    if len(groups) > MAX_DIMS:
        raise RuntimeError(f"slice_scatter: GGML tensors have at most {MAX_DIMS} dimensions and a write of "
                           f"{y.shape} into {x.shape} at {tuple(starts)} cuts {len(groups)} blocks that cannot "
                           f"be merged; write through a view of fewer dimensions")
    merged = SliceScatter.apply(_reshape(x, [g[0] for g in groups]), _reshape(y, [g[1] for g in groups]),
                                   tuple(g[2] for g in groups))
    return _reshape(merged, x.shape)


# ---- ops that read one dimension ---------------------------------------------------------------
def around(x, d):
    """x as (prod of the dims before d, x.shape[d], prod of the dims after d)."""
    return _reshape(x, (_prod(x.shape[:d]), x.shape[d], _prod(x.shape[d + 1:])))


def along(x, d, fn):
    """`fn(y, 1)` for an op along one dimension, on y = x folded around dimension d, unfolded after (the
    op may change that dimension's size)."""
    out = fn(around(x, d), 1)
    return _reshape(out, x.shape[:d] + (out.shape[1],) + x.shape[d + 1:])


def tile(x, src, sizes):
    """x (of shape `src`) tiled `sizes[i]` times along each dimension i: an expand of (1, s0, 1, s1, ...)
    to (r0, s0, r1, s1, ...), which is the tiling in row-major order."""
    inner = tuple(n for s in src for n in (1, s))
    outer = tuple(n for r, s in zip(sizes, src) for n in (r, s))
    return _reshape(expand(_reshape(x, inner), inner, outer), tuple(r * s for r, s in zip(sizes, src)))


def sum_to(x, kept):
    """x summed over the dimensions where `kept` (x's rank) has 1, kept as size 1, one dimension at a time."""
    out = x
    for d, n in enumerate(kept):
        if n == 1 and out.shape[d] != 1:
            folded = around(out, d)
            summed = SumTo.apply(folded, (folded.shape[0], 1, folded.shape[2]))
            out = _reshape(summed, out.shape[:d] + (1,) + out.shape[d + 1:])
    return out


def cat(parts, d):
    """The tensors `parts` joined along dimension d, as a concat of (before, size, after) blocks."""
    out = around(parts[0], d)
    for t in parts[1:]:
        out = Concat.apply(out, around(t, d), 1)
    shape = parts[0].shape
    return _reshape(out, shape[:d] + (out.shape[1],) + shape[d + 1:])


def matmul(matmul3, a, b, batch):
    """a @ b with >2 batch dimensions: both broadcast to `batch`, folded into one batch dimension."""
    a = a.expand(batch + a.shape[-2:])   # views.expand (views build on this module)
    b = b.expand(batch + b.shape[-2:])
    n = _prod(batch)
    out = matmul3(_reshape(a, (n,) + a.shape[-2:]), _reshape(b, (n,) + b.shape[-2:]))
    return _reshape(out, batch + out.shape[-2:])
