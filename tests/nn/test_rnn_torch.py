"""RNN, LSTM, GRU and their cells against PyTorch: the same parameter names and shapes (a torch state_dict
loads), then outputs, final states and the gradients of the input, the initial states and every parameter
on copied weights; init range, dropout between layers, unbatched input, and the errors."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn

torch = pytest.importorskip("torch")
from torch_parity_util import compare, copy_weights, leaf, randn  # noqa: E402  (needs torch)
T, B, IN, H = 5, 3, 4, 6


def pair(name, *args, **kwargs):
    torch.manual_seed(0)
    return copy_weights(getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs))


CONFIGS = {
    "default": {},
    "2layers_bidir_batch_first": dict(num_layers=2, bidirectional=True, batch_first=True),
    "3layers_no_bias": dict(num_layers=3, bias=False),
    "bidir": dict(bidirectional=True),
}
MODELS = [("RNN", {}), ("RNN", dict(nonlinearity="relu")), ("LSTM", {}), ("GRU", {})]


@pytest.mark.parametrize("config", list(CONFIGS.values()), ids=list(CONFIGS))
@pytest.mark.parametrize("name,extra", MODELS, ids=["rnn_tanh", "rnn_relu", "lstm", "gru"])
def test_sequence_outputs_and_gradients(name, extra, config):
    ours, theirs = pair(name, IN, H, **extra, **config)
    shape = (B, T, IN) if config.get("batch_first") else (T, B, IN)
    x, tx = leaf(randn(*shape))
    compare(ours, theirs, [x], [tx])


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_initial_states_get_gradients(name):
    ours, theirs = pair(name, IN, H, num_layers=2, bidirectional=True)
    x, tx = leaf(randn(T, B, IN))
    h, th = leaf(randn(4, B, H))
    if name == "LSTM":
        c, tc = leaf(randn(4, B, H))
        compare(ours, theirs, [x, (h, c)], [tx, (th, tc)])
    else:
        compare(ours, theirs, [x, h], [tx, th])


def test_lstm_projection():
    ours, theirs = pair("LSTM", IN, H, num_layers=2, proj_size=3, bidirectional=True, batch_first=True)
    x, tx = leaf(randn(B, T, IN))
    h, th = leaf(randn(4, B, 3))
    c, tc = leaf(randn(4, B, H))
    compare(ours, theirs, [x, (h, c)], [tx, (th, tc)])


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_unbatched_input(name):
    ours, theirs = pair(name, IN, H, num_layers=2, bidirectional=True)
    x, tx = leaf(randn(T, IN))
    h, th = leaf(randn(4, H))
    if name == "LSTM":
        c, tc = leaf(randn(4, H))
        compare(ours, theirs, [x, (h, c)], [tx, (th, tc)])
    else:
        compare(ours, theirs, [x, h], [tx, th])
    out, _ = ours(ggrad.tensor(randn(T, IN)))
    assert out.shape == (T, 2 * H)


def test_dropout_between_layers():
    """p=1 zeroes what the second layer reads (deterministic, so it compares with torch); eval turns it off;
    p=0.5 in training differs from eval."""
    ours, theirs = pair("LSTM", IN, H, num_layers=2, dropout=1.0)
    x, tx = leaf(randn(T, B, IN))
    compare(ours, theirs, [x], [tx])
    ours.eval()
    theirs.eval()
    x, tx = leaf(randn(T, B, IN))
    compare(ours, theirs, [x], [tx])
    ours.dropout = 0.5
    ours.train()
    x = ggrad.tensor(randn(T, B, IN))
    trained = ours(x)[0].numpy()
    ours.eval()
    assert not np.allclose(trained, ours(x)[0].numpy())


def test_dropout_warns_with_one_layer():
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.GRU(IN, H, dropout=0.2)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"])
def test_init_is_uniform_in_one_over_sqrt_hidden(name):
    hidden = 400
    model = getattr(nn, name)(50, hidden)
    bound = 1 / np.sqrt(hidden)
    values = np.concatenate([p.numpy().ravel() for p in model.parameters()])
    assert values.min() >= -bound and values.max() <= bound
    assert abs(values.std() - bound / np.sqrt(3)) < 0.02 * bound
    assert abs(values.mean()) < 0.02 * bound


CELLS = [("RNNCell", {}), ("RNNCell", dict(nonlinearity="relu")), ("LSTMCell", {}), ("GRUCell", {}),
         ("GRUCell", dict(bias=False))]


@pytest.mark.parametrize("name,extra", CELLS, ids=["rnn", "rnn_relu", "lstm", "gru", "gru_no_bias"])
@pytest.mark.parametrize("batched", [True, False])
def test_cells(name, extra, batched):
    ours, theirs = pair(name, IN, H, **extra)
    lead = (B,) if batched else ()
    x, tx = leaf(randn(*lead, IN))
    h, th = leaf(randn(*lead, H))
    if name == "LSTMCell":
        c, tc = leaf(randn(*lead, H))
        compare(ours, theirs, [x, (h, c)], [tx, (th, tc)])
    else:
        compare(ours, theirs, [x, h], [tx, th])


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_start_from_zeros(name):
    ours, theirs = pair(name, IN, H)
    x, tx = leaf(randn(B, IN))
    compare(ours, theirs, [x], [tx])


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_shape_errors_are_runtime_errors(name):
    model = getattr(nn, name)(IN, H, num_layers=2)
    with pytest.raises(RuntimeError, match="input_size"):
        model(ggrad.tensor(randn(T, B, IN + 1)))
    bad = ggrad.tensor(randn(1, B, H))
    with pytest.raises(RuntimeError, match=r"Expected hidden"):
        model(ggrad.tensor(randn(T, B, IN)), (bad, bad) if name == "LSTM" else bad)
    with pytest.raises(ValueError):
        getattr(nn, name)(IN, H, dropout=1.5)


def test_bad_nonlinearity_and_proj_size():
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(IN, H, nonlinearity="gelu")
    with pytest.raises(ValueError, match="proj_size"):
        nn.LSTM(IN, H, proj_size=H)


def test_repr():
    assert repr(nn.LSTM(IN, H, num_layers=2, batch_first=True)) == repr(
        torch.nn.LSTM(IN, H, num_layers=2, batch_first=True))
    assert repr(nn.GRUCell(IN, H, bias=False)) == repr(torch.nn.GRUCell(IN, H, bias=False))


def test_a_sequence_is_one_graph_with_a_fixed_cost_per_step():
    """Forward, backward and the read compute as one graph; each time step adds about the same nodes
    (the concatenations that join per-step pieces vary a little with the count)."""
    model = nn.LSTM(IN, H, num_layers=2, bidirectional=True)
    counts = []
    for steps in (4, 8, 12):
        x = ggrad.tensor(randn(steps, B, IN), requires_grad=True)
        ggrad.reset_stats()
        out, (h, c) = model(x)
        (out.sum() + c.sum()).backward()
        x.grad.numpy()
        stats = ggrad.stats()
        assert stats["computes"] == 1
        counts.append(stats["nodes"])
    first, second = counts[1] - counts[0], counts[2] - counts[1]
    assert abs(second - first) <= 0.05 * first


@pytest.mark.parametrize("shape", [(4 * H, H), (H, 4 * H), (6, 2, 3)])
def test_orthogonal_init(shape):
    """init.orthogonal_ (common on LSTM weight_hh): orthonormal rows or columns times gain, as torch's."""
    t = ggrad.zeros(*shape)
    nn.init.orthogonal_(t, gain=2.0)
    q = t.numpy().reshape(shape[0], -1)
    gram = q.T @ q if q.shape[0] >= q.shape[1] else q @ q.T
    np.testing.assert_allclose(gram, 4.0 * np.eye(gram.shape[0]), atol=1e-5)
    reference = torch.nn.init.orthogonal_(torch.zeros(*shape), gain=2.0).numpy().reshape(shape[0], -1)
    np.testing.assert_allclose(np.linalg.svd(q, compute_uv=False), np.linalg.svd(reference, compute_uv=False),
                               rtol=1e-5)
    model = nn.LSTM(IN, H)
    for name, p in model.named_parameters():
        if "weight_hh" in name:
            nn.init.orthogonal_(p)
    np.testing.assert_allclose(model.weight_hh_l0.numpy().T @ model.weight_hh_l0.numpy(), np.eye(H), atol=1e-5)
