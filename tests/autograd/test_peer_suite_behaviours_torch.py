"""The behaviours a peer project's operator suite checks (issue 34's list), each against PyTorch: shapes of
advanced indexing and friends, values at edges (integer limits, -inf, probability targets, empty pieces),
dtypes, and error types."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

A = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)


def _both(fn, *arrays, grad=False):
    """fn(lib, *tensors) for ggrad and torch, on the same arrays."""
    ours = fn(ggrad, *[ggrad.tensor(a, requires_grad=grad) for a in arrays])
    theirs = fn(torch, *[torch.tensor(a, requires_grad=grad) for a in arrays])
    return ours, theirs


def _equal(ours, theirs, rtol=0.0, atol=0.0):
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol)


SHAPES = {
    "index tensors separated by a slice": lambda L, x: x[[0, 1], :, [1, 2]],
    "index tensors separated by None": lambda L, x: x[[0, 1], None, [1, 2]],
    "None and steps > 1": lambda L, x: x[None, ::2, 1:, None, ::3],
    "2-D index with an int": lambda L, x: x[1, L.tensor([[0, 1], [2, 0]])],
    "2-D index then an int": lambda L, x: x[L.tensor([[0, 1], [1, 0]]), 2],
    "int then a 2-D index": lambda L, x: x[:, 1, L.tensor([[0, 1], [3, 2]])],
    "gather with a smaller index": lambda L, x: L.gather(x[0, :, :, 0], 1, L.tensor([[0, 1], [2, 3]])),
    "gather with a smaller 3-D index": lambda L, x: L.gather(x[0], 2, L.tensor([[[0, 1], [2, 3]]])),
    "log_softmax of a 0-d tensor": lambda L, x: x[0, 0, 0, 0].log_softmax(0),
    "einsum, 4-D intermediate": lambda L, x: L.einsum("abcd,ed->abce", x, x[0, 0]),
}


@pytest.mark.parametrize("name", SHAPES)
def test_shapes(name):
    _equal(*_both(SHAPES[name], A))


def test_nonzero_of_empty_tensors():
    for shape in [(0,), (0, 3), (2, 0, 4)]:
        _equal(*_both(lambda L, x: x.nonzero(), np.zeros(shape, np.float32)))


def test_integers_at_the_edges_of_the_exact_range():
    """min/argmin/max/argmax/shifts/sums exact within +-2**24 (README's Dtypes); storing, views, cat, stack, flip
    and indexing keep every int32 value, as PyTorch."""
    inside = np.array([2**24, -2**24, 5, 2**24 - 1, -(2**24 - 3)], np.int64)
    for fn in (lambda L, x: x.min(), lambda L, x: x.argmin(), lambda L, x: x.max(), lambda L, x: x.argmax(),
               lambda L, x: x // 3, lambda L, x: x.abs(), lambda L, x: x.sort().values):
        _equal(*_both(fn, inside))
    _equal(*_both(lambda L, x: x << 2, np.array([2**22 - 1, -3, 2**21], np.int64)))
    _equal(*_both(lambda L, x: x >> 3, np.array([2**24, -2**24 + 8, 1023], np.int64)))
    full = np.array([2**31 - 1, -2**31, 2**24 + 1, 5], np.int64)
    for fn in (lambda L, x: x, lambda L, x: x[1:], lambda L, x: L.cat([x, x]), lambda L, x: L.stack([x, x], 1),
               lambda L, x: x.flip(0), lambda L, x: x[L.tensor([2, 0, 3])],
               lambda L, x: x.reshape(2, 2).t().contiguous()):
        _equal(*_both(fn, full))


def test_logaddexp_gradients_at_infinities_and_ties():
    x = np.array([-np.inf, 0.0, -np.inf, 1.0, 2.0, np.inf], np.float32)
    y = np.array([-np.inf, -np.inf, 1.0, 1.0, -1.0, np.inf], np.float32)
    (gx, gy), (tx, ty) = [ggrad.tensor(x, requires_grad=True), ggrad.tensor(y, requires_grad=True)], \
        [torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)]
    ours, theirs = ggrad.logaddexp(gx, gy), torch.logaddexp(tx, ty)
    _equal(ours, theirs, rtol=1e-6)
    ours.sum().backward()
    theirs.sum().backward()
    _equal(gx.grad, tx.grad, rtol=1e-6)
    _equal(gy.grad, ty.grad, rtol=1e-6)


@pytest.mark.parametrize("shape", [(4,), (3, 4), (2, 3, 4), (2, 3, 2, 2)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing, weighted", [(0.0, False), (0.2, False), (0.1, True)])
def test_cross_entropy_with_probability_targets_gives_the_target_its_gradient(shape, reduction, smoothing,
                                                                               weighted):
    rng = np.random.default_rng(0)
    logits = rng.standard_normal(shape).astype(np.float32)
    probs = rng.random(shape).astype(np.float32)
    probs /= probs.sum(axis=1 if len(shape) > 1 else 0, keepdims=True)
    classes = shape[1] if len(shape) > 1 else shape[0]
    weight = np.linspace(0.5, 2.0, classes).astype(np.float32) if weighted else None

    def loss(L, x, p):
        w = None if weight is None else L.tensor(weight)
        return L.nn.functional.cross_entropy(x, p, weight=w, reduction=reduction, label_smoothing=smoothing)

    (gx, gp), (tx, tp) = [ggrad.tensor(a, requires_grad=True) for a in (logits, probs)], \
        [torch.tensor(a, requires_grad=True) for a in (logits, probs)]
    ours, theirs = loss(ggrad, gx, gp), loss(torch, tx, tp)
    _equal(ours, theirs, rtol=1e-5, atol=1e-6)
    ours.sum().backward()
    theirs.sum().backward()
    _equal(gx.grad, tx.grad, rtol=1e-5, atol=1e-6)
    _equal(gp.grad, tp.grad, rtol=1e-5, atol=1e-6)


def test_cat_gives_an_empty_piece_its_empty_gradient():
    (ge, gb), (te, tb) = [ggrad.tensor(np.zeros((0, 3), np.float32), requires_grad=True),
                          ggrad.tensor(np.ones((2, 3), np.float32), requires_grad=True)], \
        [torch.zeros(0, 3, requires_grad=True), torch.ones(2, 3, requires_grad=True)]
    ggrad.cat([ge, gb]).sum().backward()
    torch.cat([te, tb]).sum().backward()
    _equal(ge.grad, te.grad)
    _equal(gb.grad, tb.grad)


def test_max_pool2d_of_integers():
    x = np.random.default_rng(1).integers(-100, 100, (1, 2, 5, 5))
    for kwargs in (dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2, ceil_mode=True)):
        ours, theirs = _both(lambda L, t: L.nn.functional.max_pool2d(t, **kwargs), x)
        assert ours.dtype == ggrad.int64
        _equal(ours, theirs)


def _same_error(fn, *arrays):
    with pytest.raises(Exception) as theirs:
        fn(torch, *[torch.tensor(a) for a in arrays])
    with pytest.raises(theirs.type):
        fn(ggrad, *[ggrad.tensor(a) for a in arrays])


ERRORS = {
    "cumsum dim out of range": (lambda L, x: x.cumsum(5), [np.ones((2, 3), np.float32)]),
    "cumprod dim out of range": (lambda L, x: x.cumprod(-4), [np.ones((2, 3), np.float32)]),
    "scatter with src of another dtype": (lambda L, x, i, s: x.scatter(0, i, s),
                                          [np.zeros(4, np.float32), np.array([0, 1]), np.array([1, 2])]),
    "meshgrid indexing": (lambda L, a, b: L.meshgrid(a, b, indexing="bad"), [np.ones(2), np.ones(3)]),
    "einsum with a second ellipsis": (lambda L, x: L.einsum("...ij...->ij", x), [np.ones((2, 2), np.float32)]),
    "conv kernel larger than the padded input": (lambda L, x, w: L.nn.functional.conv2d(x, w),
                                                 [np.ones((1, 1, 3, 3), np.float32),
                                                  np.ones((1, 1, 5, 5), np.float32)]),
    "linspace to bool": (lambda L: L.linspace(0, 1, 5, dtype=L.bool), []),
    "sum to float64 (ggrad: its clear float64 error, a TypeError and RuntimeError)":
        (lambda L, x: x.sum(dtype=L.float64) if L is ggrad else (_ for _ in ()).throw(TypeError()),
         [np.ones(3, np.float32)]),
}


@pytest.mark.parametrize("name", ERRORS)
def test_error_types(name):
    fn, arrays = ERRORS[name]
    _same_error(fn, *arrays)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape, padding", [((1, 2, 3), (2, 2)), ((1, 2, 3), (3, 0)), ((1, 2, 3), (-1, 1)),
                                            ((2, 3), (1, 1)), ((1, 1, 2, 3), (1, 1, 2, 2)), ((3,), (1, 1)),
                                            ((1, 2, 3), (1, 1, 1, 1)), ((1, 2, 0), (1, 1)), ((1, 0, 3), (1, 1)),
                                            ((1, 1, 1, 2, 3), (1, 1, 1, 1, 1, 1)), ((1, 2, 3), (4, 4)),
                                            ((1, 2, 3, 4, 5), (1, 1))])
def test_padding_modes_accept_and_reject_as_pytorch(mode, shape, padding):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    try:
        theirs = torch.nn.functional.pad(torch.tensor(x), padding, mode=mode)
    except Exception as e:   # noqa: BLE001  (PyTorch's type is the specification)
        with pytest.raises(type(e)):
            ggrad.nn.functional.pad(ggrad.tensor(x), padding, mode=mode)
        return
    _equal(ggrad.nn.functional.pad(ggrad.tensor(x), padding, mode=mode), theirs)


@pytest.mark.parametrize("equation, shapes", [("abc,cde,efg->abdfg", [(2, 2, 3), (3, 2, 2), (2, 2, 2)]),
                                              ("ab,cde->abcde", [(2, 3), (2, 3, 4)]),
                                              ("abcd,aefg->bcdefg", [(2, 2, 3, 2), (2, 3, 2, 2)]),
                                              ("abcde,ef->abcdf", [(2, 1, 3, 2, 4), (4, 3)])])
def test_einsum_with_intermediates_of_more_than_4_dimensions(equation, shapes):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ours, theirs = [ggrad.tensor(a, requires_grad=True) for a in arrays], [torch.tensor(a, requires_grad=True)
                                                                           for a in arrays]
    y_ours, y_theirs = ggrad.einsum(equation, *ours), torch.einsum(equation, *theirs)
    _equal(y_ours, y_theirs, rtol=1e-5, atol=1e-6)
    weights = rng.standard_normal(tuple(y_theirs.shape)).astype(np.float32)
    (y_ours * ggrad.tensor(weights)).sum().backward()
    (y_theirs * torch.tensor(weights)).sum().backward()
    for g, t in zip(ours, theirs):
        _equal(g.grad, t.grad, rtol=1e-5, atol=1e-5)
