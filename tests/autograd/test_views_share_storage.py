"""Views share storage with their base, as PyTorch's: every case runs the same code in torch and in ggrad
and compares the values, gradients, errors and storage queries."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

BASE = np.arange(24, dtype=np.float32).reshape(4, 6) - 7.0

VIEWS = {
    "slice": lambda x: x[1:3],
    "int": lambda x: x[1],
    "column": lambda x: x[:, 2],
    "slice_int": lambda x: x[1:3, 0],
    "ellipsis": lambda x: x[..., 1:4],
    "new_axis": lambda x: x[None, 2],
    "full": lambda x: x[:],
    "view": lambda x: x.view(24),
    "view_split": lambda x: x.view(2, 2, 6),
    "reshape": lambda x: x.reshape(8, 3),
    "transpose": lambda x: x.transpose(0, 1),
    "T": lambda x: x.T,
    "t": lambda x: x.t(),
    "permute": lambda x: x.permute(1, 0),
    "narrow": lambda x: x.narrow(1, 2, 3),
    "select": lambda x: x.select(1, -1),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "squeeze": lambda x: x[1:2].squeeze(0),
    "flatten": lambda x: x.flatten(),
    "movedim": lambda x: x.movedim(0, 1),
    "split": lambda x: x.split(2)[1],
    "chunk": lambda x: x.chunk(3, 1)[2],
    "unbind": lambda x: x.unbind(1)[3],
    "strided": lambda x: x[::2],
    "strided_columns": lambda x: x[1:, 1::2],
    "strided_chain": lambda x: x.T[::3][1, 1:],
    "diagonal": lambda x: x.diagonal(),
    "diagonal_offset": lambda x: x[:, 1:].diagonal(-1),
    "diagonal_dims": lambda x: x.view(2, 2, 6).diagonal(1, 0, 2),
    "diagonal_transposed": lambda x: x.diagonal(0, 1, 0),
    "diagonal_empty": lambda x: x.diagonal(7),
    "chain": lambda x: x[1:].T[2:5][1],
    "chain_reshape": lambda x: x.view(2, 12)[1].view(3, 4)[:, 1:3],
}

WRITES = {
    "add_": lambda v, lib: v.add_(1.5),
    "mul_": lambda v, lib: v.mul_(-2),
    "zero_": lambda v, lib: v.zero_(),
    "fill_": lambda v, lib: v.fill_(7),
    "copy_": lambda v, lib: v.copy_(lib.ones(v.shape) * 3),
    "setitem": lambda v, lib: v.__setitem__(Ellipsis, 5.0),
    "clamp_": lambda v, lib: v.clamp_(max=3),
    "masked_fill_": lambda v, lib: v.masked_fill_(v > 5, -1.0),
    "iadd": lambda v, lib: v.__iadd__(2.0),
    "exp_": lambda v, lib: v.exp_(),
}


def both(fn):
    """fn(lib, tensor) run in torch and in ggrad on copies of BASE."""
    return fn(torch, torch.tensor(BASE)), fn(ggrad, ggrad.tensor(BASE))


def close(t, g, what=""):
    np.testing.assert_allclose(g.numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-6, err_msg=what)


@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("kind", sorted(VIEWS))
def test_write_through_a_view_is_seen_by_the_base_and_other_views(kind, write):
    def run(lib, x):
        earlier = x[1:3, 1:5]   # an existing view, overlapping most kinds
        v = VIEWS[kind](x)
        WRITES[write](v, lib)
        return x, v, earlier
    for t, g in zip(*both(run)):
        close(t, g, f"{kind} {write}")


@pytest.mark.parametrize("kind", sorted(VIEWS))
def test_write_to_the_base_is_seen_by_existing_views(kind):
    def run(lib, x):
        v = VIEWS[kind](x)
        x.mul_(3)
        x[2] = -4.0
        w = VIEWS[kind](x)
        return v, w, v + 1
    for t, g in zip(*both(run)):
        close(t, g, kind)


def test_views_of_views_after_the_base_changes():
    def run(lib, x):
        v = x.view(2, 12)[1]
        x.add_(100)
        w = v.view(3, 4).T
        w[1].mul_(-1)
        v[:2] = 0.5
        x[3, 5] = 9
        return x, v, w, w._base is x, v._base is x
    t_out, g_out = both(run)
    for t, g in zip(t_out[:3], g_out[:3]):
        close(t, g)
    assert g_out[3:] == t_out[3:] == (True, True)


def _grads(fn):
    """Gradients of a leaf `a` (and `b`) of a loss built by fn(lib, a, b), in torch and in ggrad."""
    out = []
    for lib in (torch, ggrad):
        a = lib.tensor(BASE / 10, requires_grad=True)
        b = lib.tensor(np.linspace(-1, 1, 6, dtype=np.float32), requires_grad=True)
        weights = lib.tensor(np.cos(np.arange(24, dtype=np.float32)).reshape(4, 6))
        loss = fn(lib, a, b, weights)
        loss.backward()
        out.append((loss, a.grad, b.grad))
    return out


GRADIENT_CASES = {
    "mul_slice": lambda lib, a, b, w: _loss(lib, a, w, lambda y: y[1:3, :2].mul_(3)),
    "add_other_leaf": lambda lib, a, b, w: _loss(lib, a, w, lambda y: y[2].add_(b * b)),
    "setitem_leaf": lambda lib, a, b, w: _loss(lib, a, w, lambda y: y.__setitem__((slice(None), 1), b[:4] * 2)),
    "zero_": lambda lib, a, b, w: _loss(lib, a, w, lambda y: y.T[1:3].zero_()),
    "copy_": lambda lib, a, b, w: _loss(lib, a, w, lambda y: y[0].copy_(b.exp())),
    "chain": lambda lib, a, b, w: _loss(lib, a, w, lambda y: y.view(2, 12)[1, 3:9].mul_(b)),
    "earlier_view": lambda lib, a, b, w: _earlier_view(a, b, w),
    "base_then_view": lambda lib, a, b, w: _base_then_view(a, b, w),
    "into_plain_buffer": lambda lib, a, b, w: _into_buffer(lib, a, b, w),
    "strided": lambda lib, a, b, w: _loss(lib, a, w, lambda y: y.__setitem__((slice(None), slice(None, None, 2)),
                                                                           b[:3] * 2)),
    "root_zero_": lambda lib, a, b, w: _root_zero(a, w),
    "diagonal": lambda lib, a, b, w: _loss(lib, a, w, lambda y: y.diagonal(1).mul_(b[:4])),
    "strided_view": lambda lib, a, b, w: _loss(lib, a, w, lambda y: y[1::2, 1:].mul_(b[1:])),
}


def _loss(lib, a, w, write):
    y = a * 2 + 1
    write(y)
    return (y * w).sum() + (y * y).sum()


def _earlier_view(a, b, w):
    y = a * 1.5 + 0.5
    row = y[1]          # made before the write, read after it
    y[1, 2:4] = b[:2] ** 2
    return (row * b).sum() + (y * w).sum()


def _root_zero(a, w):
    y = a * 2
    z = y * w
    y.zero_()            # y's old value gets no gradient; z keeps its own
    y.add_(a)
    return (z + y * y).sum()


def _into_buffer(lib, a, b, w):
    buf = lib.zeros(4, 6)   # requires no grad until a write brings some in
    buf[1:3, :2] = a[:2, 4:] * 3
    buf.T[5].add_(b[:4])
    return (buf * w).sum() + buf[2].pow(2).sum()


def _base_then_view(a, b, w):
    y = a * 1.5
    col = y[:, 3]
    y.mul_(3).add_(b[0])   # in-place on the base: col follows, with the base's new history
    return (col * b[:4]).sum()


@pytest.mark.parametrize("case", sorted(GRADIENT_CASES))
def test_gradients_through_in_place_writes_to_views(case):
    (t_loss, t_ga, t_gb), (g_loss, g_ga, g_gb) = _grads(GRADIENT_CASES[case])
    np.testing.assert_allclose(g_loss.item(), t_loss.item(), rtol=1e-5)
    for t, g in ((t_ga, g_ga), (t_gb, g_gb)):
        if t is None:
            assert g is None or not np.any(g.numpy())
        else:
            np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("write", [lambda a: a[0].add_(1), lambda a: a.__setitem__(0, 1.0),
                                   lambda a: a.T[1].zero_(), lambda a: a.view(24)[3:5].fill_(2)])
def test_in_place_on_a_view_of_a_leaf_that_requires_grad_raises_as_torch(write):
    for lib in (torch, ggrad):
        a = lib.tensor(BASE, requires_grad=True)
        with pytest.raises(RuntimeError, match="view of a leaf Variable"):
            write(a)


def test_no_grad_writes_change_the_leaf_and_keep_its_gradient():
    out = []
    for lib in (torch, ggrad):
        a = lib.tensor(BASE, requires_grad=True)
        row = a[2]
        with lib.no_grad():
            a[0] = 0
            a.T[1].mul_(10)
            row.add_(1)
        assert a.is_leaf and a.requires_grad and row.requires_grad
        ((row * row).sum() + a.sum()).backward()
        out.append((a.detach().clone(), row.detach().clone(), a.grad))
    for t, g in zip(*out):
        close(t, g)


def test_view_made_under_no_grad_then_written_with_grad_raises_as_torch():
    for lib in (torch, ggrad):
        a = lib.tensor(BASE, requires_grad=True)
        y = a * 1
        with lib.no_grad():
            v = y[0]
        with pytest.raises(RuntimeError, match="no_grad"):
            v.add_(1)


def test_parameter_edits_under_no_grad_reach_the_module_and_the_optimizer():
    results = []
    for lib in (torch, ggrad):
        lib.manual_seed(0)
        lin = lib.nn.Linear(6, 3)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor(BASE[:3] / 10))
            lin.bias.zero_()
            lin.weight[0] = 0.25
            lin.weight[:, 4:].mul_(-1)
            lib.nn.init.constant_(lin.weight[2, :2], 3.0)
        weight = lin.weight
        opt = lib.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
        for _ in range(2):
            opt.zero_grad()
            lin(lib.tensor(BASE)).pow(2).mean().backward()
            opt.step()
        assert lin.weight is weight and weight.is_leaf
        results.append((lin.weight.detach().clone(), lin.bias.detach().clone()))
    for t, g in zip(*results):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("split", [lambda x: x.split(2), lambda x: x.split([1, 3]), lambda x: x.chunk(2, 1),
                                   lambda x: x.unbind(0), lambda x: x.unbind(1)])
def test_split_chunk_unbind_pieces_write_back(split):
    def run(lib, x):
        pieces = split(x)
        for i, piece in enumerate(pieces):
            piece.add_(10 * i)
        pieces[-1].zero_()
        return (x,) + tuple(pieces)
    for t, g in zip(*both(run)):
        close(t, g)


@pytest.mark.parametrize("split", [lambda x: x.split(2), lambda x: x.chunk(3, 1), lambda x: x.unbind(0)])
def test_in_place_on_pieces_of_a_multi_output_view_with_grad_raises_as_torch(split):
    for lib in (torch, ggrad):
        y = lib.tensor(BASE, requires_grad=True) * 2
        with pytest.raises(RuntimeError, match="multiple views"):
            split(y)[0].mul_(2)


@pytest.mark.parametrize("expanded", [lambda x: x[:1].expand(4, 6), lambda x: x[2].expand(3, 6),
                                      lambda x: x[:, :1].expand(4, 6).T])
def test_in_place_on_an_expanded_view_raises_as_torch(expanded):
    for lib in (torch, ggrad):
        x = lib.tensor(BASE)
        with pytest.raises(RuntimeError, match="more than one element"):
            expanded(x).add_(1)


def test_expand_without_broadcast_is_a_writable_view():
    def run(lib, x):
        v = x[1].expand(1, 6)
        v.mul_(2)
        return x, v
    for t, g in zip(*both(run)):
        close(t, g)


def test_reshape_of_a_strided_view_copies_and_view_refuses_as_torch():
    def run(lib, x):
        copy = x.T.reshape(24)
        copy.add_(1)
        return x, copy, copy._base is None, x.T.reshape(6, 4)._base is x
    t_out, g_out = both(run)
    close(t_out[0], g_out[0])
    close(t_out[1], g_out[1])
    assert g_out[2:] == t_out[2:]
    for lib in (torch, ggrad):
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            lib.tensor(BASE).T.view(24)


@pytest.mark.parametrize("kind", sorted(VIEWS))
def test_storage_queries_match_torch(kind):
    def run(lib, x):
        v = VIEWS[kind](x)
        strides = tuple(s for s, n in zip(v.stride(), v.shape) if n != 1)   # a size-1 dim's stride is arbitrary
        return (v.is_contiguous(), v._is_view(), v._base is x, strides, v.storage_offset(),
                v.data_ptr() - x.data_ptr() if v.numel() else v.data_ptr(), v.contiguous().is_contiguous(), v.element_size())
    t_out, g_out = both(run)
    assert g_out == t_out


def test_non_views_and_copies_do_not_share_storage():
    def run(lib, x):
        fancy = x[[0, 2]]
        masked = x[x > 0]
        strided = x[::2]
        cloned = x[1].clone()
        for t in (fancy, masked, cloned):
            t.add_(1000)
        return x, x._base is None, x._is_view(), fancy._is_view(), x.contiguous() is x
    t_out, g_out = both(run)
    close(t_out[0], g_out[0])
    assert g_out[1:] == t_out[1:]


def test_in_place_after_saving_a_view_raises_at_backward_as_torch():
    for lib in (torch, ggrad):
        a = lib.tensor(BASE, requires_grad=True)
        y = a * 1
        v = y[1]
        z = (v * v).sum()   # mul saves v
        y.add_(1)           # bumps v's version: v shares y's version counter
        assert v._version == y._version
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.backward()


@pytest.mark.parametrize("dtype", ["float16", "int64", "int32"])
def test_writes_through_views_keep_the_dtype(dtype):
    def run(lib, x):
        x = x.to(getattr(lib, dtype))
        v = x.T[1:3]
        v.mul_(2)
        x[0, :2] = 5
        return x.float(), v.float(), v.dtype == getattr(lib, dtype)
    t_out, g_out = both(run)
    close(t_out[0], g_out[0])
    close(t_out[1], g_out[1])
    assert g_out[2] == t_out[2]


def test_writing_inf_into_a_slice_keeps_the_other_values():
    def run(lib, x):
        x[0] = float("inf")
        x[1:3, 2] = float("-inf")
        x[0, 1] = 1.0
        return (x,)
    for t, g in zip(*both(run)):
        np.testing.assert_array_equal(g.numpy(), t.numpy())


def test_sinusoidal_positions_written_through_strided_slices():
    def run(lib, x):
        pe = lib.zeros(8, 6)
        position = lib.arange(8, dtype=lib.float32).unsqueeze(1)
        angle = position * lib.exp(lib.arange(0, 6, 2, dtype=lib.float32) * -0.5)
        pe[:, 0::2] = lib.sin(angle)
        pe[:, 1::2] = lib.cos(angle)
        return (pe,)
    for t, g in zip(*both(run)):
        close(t, g)


def test_augmented_assignment_through_indexing():
    def run(lib, x):
        row = x[1]
        x[1:3, 2] += 5
        x[:, ::2] *= 2
        x[0] -= row
        return x, row
    for t, g in zip(*both(run)):
        close(t, g)


def test_detach_and_data_share_storage_without_history():
    out = []
    for lib in (torch, ggrad):
        a = lib.tensor(BASE / 10, requires_grad=True)
        y = a * 2
        d = y.detach()
        keep = y[1]
        d[0] = 1.0                      # allowed with grad on: a detached tensor records nothing
        y.detach()[2].mul_(-1)
        a.data[3].fill_(5.0)
        assert y.requires_grad and a.is_leaf and not d.requires_grad
        assert d._base is None and not d._is_view() and d[1]._base is d and d.data_ptr() == y.data_ptr()
        (a * 1).sum().backward()
        out.append((y, d, keep, a, a.grad))
    for t, g in zip(*out):
        close(t, g)


def test_data_edits_reach_the_parameter():
    out = []
    for lib in (torch, ggrad):
        lib.manual_seed(0)
        lin = lib.nn.Linear(6, 3)
        lin.weight.data.copy_(lib.tensor(BASE[:3]))
        lin.weight.data[1].zero_()
        lin.bias.data.fill_(0.5)
        out.append((lin.weight, lin.bias, lin(lib.tensor(BASE))))
    for t, g in zip(*out):
        close(t, g)


def test_writing_through_a_slice_of_an_expanded_view_raises():
    """PyTorch writes x[0] here; ggrad refuses with a RuntimeError that says to clone (documented)."""
    x = ggrad.tensor(BASE)
    with pytest.raises(RuntimeError, match="clone"):
        x[0].expand(3, 6)[1].add_(1)
    np.testing.assert_array_equal(x.numpy(), BASE)
