"""torch.nn.utils.rnn's packing against torch, and RNN/LSTM/GRU fed a PackedSequence: outputs, final states
(each sequence's last real step), and the gradients of the padded input, the initial state and every weight."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
from ggrad.nn.utils.rnn import (PackedSequence, pack_padded_sequence, pack_sequence, pad_packed_sequence,
                                pad_sequence, unpad_sequence)
from torch_parity_util import copy_weights, leaf

torch = pytest.importorskip("torch")
TR = torch.nn.utils.rnn
RNG = np.random.default_rng(17)


def _randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("lengths, enforce_sorted", [([5, 3, 3, 1], True), ([2, 5, 1, 4], False)])
@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_and_pad_match_torch(lengths, enforce_sorted, batch_first):
    x = _randn(4, 5, 3) if batch_first else _randn(5, 4, 3)
    ours, theirs = leaf(x)
    po = pack_padded_sequence(ours, lengths, batch_first, enforce_sorted)
    pt = TR.pack_padded_sequence(theirs, torch.tensor(lengths), batch_first, enforce_sorted)
    assert isinstance(po, PackedSequence) and po.batch_sizes.dtype == ggrad.int64
    np.testing.assert_array_equal(po.data.numpy(), pt.data.detach().numpy())
    np.testing.assert_array_equal(po.batch_sizes.numpy(), pt.batch_sizes.numpy())
    for a, b in ((po.sorted_indices, pt.sorted_indices), (po.unsorted_indices, pt.unsorted_indices)):
        assert (a is None) == (b is None) and (a is None or np.array_equal(a.numpy(), b.numpy()))
    yo, lo = pad_packed_sequence(po, batch_first, padding_value=-2.0, total_length=6)
    yt, lt = TR.pad_packed_sequence(pt, batch_first, padding_value=-2.0, total_length=6)
    np.testing.assert_array_equal(yo.numpy(), yt.detach().numpy())
    np.testing.assert_array_equal(lo.numpy(), lt.numpy())
    w = _randn(*yt.shape)
    (yo * ggrad.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


@pytest.mark.parametrize("batch_first, side", [(False, "right"), (True, "left")])
def test_pad_unpad_pack_sequence_match_torch(batch_first, side):
    arrays = [_randn(n, 2) for n in (3, 5, 1)]
    ours = [ggrad.tensor(a) for a in arrays]
    theirs = [torch.tensor(a) for a in arrays]
    po = pad_sequence(ours, batch_first, 7.0, side)
    pt = TR.pad_sequence(theirs, batch_first, 7.0, side)
    np.testing.assert_array_equal(po.numpy(), pt.numpy())
    if side == "right":
        for a, b in zip(unpad_sequence(po, [3, 5, 1], batch_first), TR.unpad_sequence(pt, torch.tensor([3, 5, 1]),
                                                                                      batch_first)):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    so, st = pack_sequence(ours, enforce_sorted=False), TR.pack_sequence(theirs, enforce_sorted=False)
    np.testing.assert_array_equal(so.data.numpy(), st.data.numpy())
    np.testing.assert_array_equal(so.batch_sizes.numpy(), st.batch_sizes.numpy())


def test_errors_match_torch():
    x = _randn(4, 3, 2)
    for pack, t in ((pack_padded_sequence, ggrad.tensor(x)), (TR.pack_padded_sequence, torch.tensor(x))):
        with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
            pack(t, [1, 3, 2])
        with pytest.raises(RuntimeError, match="greater than 0"):
            pack(t, [3, 2, 0])
    with pytest.raises(ValueError, match="Expected total_length to be at least"):
        pad_packed_sequence(pack_padded_sequence(ggrad.tensor(x), [4, 2, 1]), total_length=2)
    with pytest.raises(ValueError, match="Expected total_length to be at least"):
        TR.pad_packed_sequence(TR.pack_padded_sequence(torch.tensor(x), [4, 2, 1]), total_length=2)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("layers, bidirectional, batch_first", [(1, False, False), (2, True, True)])
@pytest.mark.parametrize("with_state", [False, True])
def test_recurrent_layers_on_packed_sequences_match_torch(kind, layers, bidirectional, batch_first, with_state):
    torch.manual_seed(0)
    theirs = getattr(torch.nn, kind)(3, 4, layers, bidirectional=bidirectional, batch_first=batch_first)
    ours, _ = copy_weights(getattr(nn, kind)(3, 4, layers, bidirectional=bidirectional, batch_first=batch_first),
                           theirs)
    lengths = [3, 6, 1, 4]
    x = _randn(4, 6, 3) if batch_first else _randn(6, 4, 3)
    xo, xt = leaf(x)
    po = pack_padded_sequence(xo, lengths, batch_first, enforce_sorted=False)
    pt = TR.pack_padded_sequence(xt, torch.tensor(lengths), batch_first, enforce_sorted=False)
    states = [leaf(_randn(layers * (2 if bidirectional else 1), 4, 4)) for _ in range(2 if kind == "LSTM" else 1)]
    hx_o = hx_t = None
    if with_state:
        hx_o = tuple(s[0] for s in states) if kind == "LSTM" else states[0][0]
        hx_t = tuple(s[1] for s in states) if kind == "LSTM" else states[0][1]
    oo, ho = ours(po, hx_o)
    ot, ht = theirs(pt, hx_t)
    assert isinstance(oo, PackedSequence)
    np.testing.assert_array_equal(oo.batch_sizes.numpy(), ot.batch_sizes.numpy())
    np.testing.assert_array_equal(oo.unsorted_indices.numpy(), ot.unsorted_indices.numpy())
    finals_o, finals_t = (list(ho), list(ht)) if kind == "LSTM" else ([ho], [ht])
    results = [(oo.data, ot.data)] + list(zip(finals_o, finals_t))
    loss_o = loss_t = 0
    for a, b in results:
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-4, atol=1e-5)
        w = _randn(*b.shape)
        loss_o = loss_o + (a * ggrad.tensor(w)).sum()
        loss_t = loss_t + (b * torch.tensor(w)).sum()
    loss_o.backward()
    loss_t.backward()
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    if with_state:
        for so, st in states:
            np.testing.assert_allclose(so.grad.numpy(), st.grad.numpy(), rtol=1e-4, atol=1e-5)
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def test_padded_output_matches_torch_after_unpacking():
    torch.manual_seed(1)
    theirs = torch.nn.GRU(2, 3)
    ours, _ = copy_weights(nn.GRU(2, 3), theirs)
    x = _randn(5, 3, 2)
    oo, _ = ours(pack_padded_sequence(ggrad.tensor(x), [5, 4, 2]))
    ot, _ = theirs(TR.pack_padded_sequence(torch.tensor(x), [5, 4, 2]))
    yo, lo = pad_packed_sequence(oo)
    yt, lt = TR.pad_packed_sequence(ot)
    np.testing.assert_allclose(yo.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)   # zeros past each end
    np.testing.assert_array_equal(lo.numpy(), lt.numpy())
