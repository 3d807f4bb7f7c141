"""ggrad.autograd.graph's saved-tensors hooks against torch.autograd.graph: what is packed, when it is
unpacked, gradients through packed tensors, save_on_cpu and disable_saved_tensors_hooks."""

import numpy as np
import pytest

import ggrad
from ggrad.autograd import graph

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
A = RNG.standard_normal((4, 3)).astype(np.float32)
B = RNG.standard_normal((4, 3)).astype(np.float32)
W = RNG.standard_normal((5, 3)).astype(np.float32)


def hooks_of(lib):
    return ggrad.autograd.graph if lib is ggrad else torch.autograd.graph


def counting(lib, fn, *arrays_and_reqs):
    """(packed shapes, unpack count, the gradients of fn's sum) for fn under counting hooks."""
    xs = [lib.tensor(a, requires_grad=r) for a, r in arrays_and_reqs]
    packed, unpacked = [], []

    def pack(t):
        packed.append(tuple(t.shape))
        return t

    def unpack(t):
        unpacked.append(tuple(t.shape))
        return t

    with hooks_of(lib).saved_tensors_hooks(pack, unpack):
        y = fn(lib, *xs)
    y.sum().backward()
    return packed, len(unpacked), [None if x.grad is None else x.grad.numpy() for x in xs]


OPS = {
    "mul": (lambda m, a, b: a * b, B),
    "div": (lambda m, a, b: a / b, B),
    "exp": (lambda m, a, b: a.exp() * b, B),
    "tanh": (lambda m, a, b: (a + b).tanh(), B),
    "relu_sigmoid": (lambda m, a, b: a.relu() + b.sigmoid(), B),
    "softmax": (lambda m, a, b: a.softmax(-1) * b, B),
    "mse": (lambda m, a, b: m.nn.functional.mse_loss(a, b), B),
}


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("reqs", [(True, True), (True, False), (False, True)])
def test_packs_and_unpacks_as_torch(name, reqs):
    fn, other = OPS[name]
    t = counting(torch, fn, (A, reqs[0]), (other, reqs[1]))
    g = counting(ggrad, fn, (A, reqs[0]), (other, reqs[1]))
    assert g[:2] == t[:2]
    for gg, tg in zip(g[2], t[2]):
        if tg is None:
            assert gg is None
        else:
            np.testing.assert_allclose(gg, tg, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reqs", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("form", ["matmul", "linear"])
def test_x_at_w_t_saves_only_what_mm_needs(reqs, form):
    """torch's mm keeps w.T for dx and x for dw; ggrad keeps the same operands and no more (compared in
    x's and w's orientation: ggrad's linear keeps w itself, the transpose of torch's mat2)."""
    saved = {}
    for lib in (torch, ggrad):
        x, w = lib.tensor(A, requires_grad=reqs[0]), lib.tensor(W, requires_grad=reqs[1])
        values = []
        with hooks_of(lib).saved_tensors_hooks(lambda t: values.append(t.detach().numpy()) or t, lambda t: t):
            y = x @ w.T if form == "matmul" else lib.nn.functional.linear(x, w)
        y.sum().backward()
        saved[lib] = values
    assert len(saved[ggrad]) == len(saved[torch]) == sum(reqs)
    def as_stored(values):
        return sorted((v if v.shape in (A.shape, W.shape) else v.T).tobytes() for v in values)
    assert as_stored(saved[ggrad]) == as_stored(saved[torch])


def test_nothing_is_packed_without_a_graph():
    packed = []
    with graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        a, b = ggrad.tensor(A, requires_grad=True), ggrad.tensor(B)
        with ggrad.no_grad():
            (a * b).exp()
        ggrad.tensor(A).exp()
    assert packed == []


def test_pack_to_numpy_gives_torch_gradients():
    """torch's docs: a pack hook may keep anything (here a numpy copy); backward reads what unpack gives."""
    def run(lib, to_host, from_host):
        x, w = lib.tensor(A, requires_grad=True), lib.tensor(W, requires_grad=True)
        with hooks_of(lib).saved_tensors_hooks(to_host, from_host):
            loss = ((x @ w.T).tanh() * 2).exp().mean()
        loss.backward()
        return x.grad.numpy(), w.grad.numpy()

    kinds = []
    got = run(ggrad, lambda t: kinds.append(type(t.numpy())) or t.detach().numpy(), lambda a: ggrad.tensor(a))
    expected = run(torch, lambda t: t.detach().numpy().copy(), lambda a: torch.from_numpy(a))
    assert kinds and set(kinds) == {np.ndarray}
    for g, t in zip(got, expected):
        np.testing.assert_allclose(g, t, rtol=1e-5, atol=1e-6)


def test_unpack_runs_at_every_read_with_the_hooks_of_record_time():
    a, b = ggrad.tensor(A, requires_grad=True), ggrad.tensor(B, requires_grad=True)
    ta, tb = torch.tensor(A, requires_grad=True), torch.tensor(B, requires_grad=True)
    counts = {}
    for lib, x, z in ((ggrad, a, b), (torch, ta, tb)):
        n = counts[lib] = [0]

        def unpack(t, n=n):
            n[0] += 1
            return t
        with hooks_of(lib).saved_tensors_hooks(lambda t: t, unpack):
            y = (x * z).sum()
        with hooks_of(lib).saved_tensors_hooks(lambda t: t, lambda t: 1 / 0):   # not the pair of record time
            y.backward(retain_graph=True)
        y.backward()
    assert counts[ggrad] == counts[torch] == [4]
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy())


def test_innermost_hooks_apply():
    outer, inner = [], []
    with graph.saved_tensors_hooks(lambda t: outer.append(1) or t, lambda t: t):
        with graph.saved_tensors_hooks(lambda t: inner.append(1) or t, lambda t: t):
            ggrad.tensor(A, requires_grad=True).exp()
        ggrad.tensor(A, requires_grad=True).exp()
    assert (len(outer), len(inner)) == (1, 1)


def test_unpack_must_give_a_tensor_as_torch():
    messages = []
    for lib in (torch, ggrad):
        x = lib.tensor(A, requires_grad=True)
        with hooks_of(lib).saved_tensors_hooks(lambda t: t, lambda t: 3):
            y = x.exp()
        with pytest.raises(TypeError) as e:
            y.sum().backward()
        messages.append(str(e.value))
    assert messages[0] == messages[1]


def test_double_backward_through_a_packed_output():
    """exp saves its output: packed, it is still differentiated through under create_graph."""
    results = []
    for lib in (torch, ggrad):
        x = lib.tensor(A, requires_grad=True)
        with hooks_of(lib).saved_tensors_hooks(lambda t: (t,), lambda p: p[0]):
            y = (x.exp() * x).sum()
            g, = lib.autograd.grad(y, x, create_graph=True)
            g2, = lib.autograd.grad(g.sum(), x)
        results.append((g.detach().numpy(), g2.numpy()))
    for got, expected in zip(results[1], results[0]):
        np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_save_on_cpu_gives_the_same_gradients():
    grads = []
    for lib in (torch, ggrad):
        model_w = lib.tensor(W, requires_grad=True)
        x = lib.tensor(A, requires_grad=True)
        with hooks_of(lib).save_on_cpu(pin_memory=False):
            loss = (x @ model_w.T).relu().pow(2).mean()
        loss.backward()
        grads.append((x.grad.numpy(), model_w.grad.numpy()))
    for got, expected in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_disable_saved_tensors_hooks_as_torch():
    for lib in (torch, ggrad):
        h = hooks_of(lib)
        with h.disable_saved_tensors_hooks("no hooks in this feature"):
            with pytest.raises(RuntimeError, match="no hooks in this feature"):
                with h.save_on_cpu():
                    pass
            with h.disable_saved_tensors_hooks("nested"):
                pass
            x = lib.tensor(A, requires_grad=True)
            x.exp().sum().backward()   # saving without hooks still works
        with h.saved_tensors_hooks(lambda t: t, lambda t: t):
            with pytest.raises(RuntimeError, match="already active"):
                with h.disable_saved_tensors_hooks("already active"):
                    pass
        with h.saved_tensors_hooks(lambda t: t, lambda t: t):   # usable again after
            pass
