"""TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder, TransformerDecoder and Transformer
against PyTorch: a torch state_dict loads (same keys and shapes), then outputs and every gradient on copied
weights (dropout 0 in training mode; eval mode with dropout > 0), post-norm and pre-norm, relu, gelu and a
callable activation, batch_first, bias=False, causal and padding masks; init, copies, errors."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn

torch = pytest.importorskip("torch")
from torch_parity_util import compare, copy_weights, leaf, randn  # noqa: E402  (needs torch)

E, HEADS, FF, S, T, B = 8, 2, 16, 5, 4, 3


def pair(name, *args, **kwargs):
    torch.manual_seed(0)
    theirs = getattr(torch.nn, name)(*args, **kwargs)
    with torch.no_grad():   # nonzero biases, so a bias wired wrongly shows
        for key, value in theirs.named_parameters():
            if "bias" in key:
                value.normal_(0, 0.1)
    return copy_weights(getattr(nn, name)(*args, **kwargs), theirs)


def causal(n):
    return nn.Transformer.generate_square_subsequent_mask(n), torch.nn.Transformer.generate_square_subsequent_mask(n)


def padding(batch, length):
    mask = np.zeros((batch, length), dtype=bool)
    mask[0, -2:] = True
    mask[-1, -1] = True
    return ggrad.tensor(mask), torch.tensor(mask)


def seq(length, batch_first):
    return leaf(randn(B, length, E) if batch_first else randn(length, B, E))


LAYER_CONFIGS = {
    "post_relu": dict(),
    "pre_gelu": dict(norm_first=True, activation="gelu"),
    "batch_first": dict(batch_first=True),
    "no_bias_pre": dict(bias=False, norm_first=True, batch_first=True),
    "eps": dict(layer_norm_eps=1e-3),
}


@pytest.mark.parametrize("config", list(LAYER_CONFIGS.values()), ids=list(LAYER_CONFIGS))
def test_encoder_layer(config):
    ours, theirs = pair("TransformerEncoderLayer", E, HEADS, FF, dropout=0.0, **config)
    x, tx = seq(S, config.get("batch_first", False))
    compare(ours, theirs, [x], [tx])


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_masks(norm_first):
    ours, theirs = pair("TransformerEncoderLayer", E, HEADS, FF, dropout=0.0, batch_first=True,
                        norm_first=norm_first)
    x, tx = seq(S, True)
    compare(ours, theirs, [x], [tx], src_mask=causal(S), src_key_padding_mask=padding(B, S), is_causal=True)


def test_encoder_layer_callable_activation():
    ours, theirs = pair("TransformerEncoderLayer", E, HEADS, FF, dropout=0.0)
    ours.activation, theirs.activation = nn.functional.silu, torch.nn.functional.silu
    x, tx = seq(S, False)
    compare(ours, theirs, [x], [tx])
    ours = nn.TransformerEncoderLayer(E, HEADS, FF, activation=nn.GELU())
    assert isinstance(ours.activation, nn.GELU)


def test_encoder_layer_eval_turns_dropout_off():
    ours, theirs = pair("TransformerEncoderLayer", E, HEADS, FF, dropout=0.3, batch_first=True)
    ours.eval()
    theirs.eval()
    x = randn(B, S, E)
    with torch.no_grad():
        expected = theirs(torch.tensor(x)).numpy()
    np.testing.assert_allclose(ours(ggrad.tensor(x)).numpy(), expected, rtol=1e-4, atol=2e-5)
    ours.train()
    assert not np.allclose(ours(ggrad.tensor(x)).numpy(), expected, atol=1e-3)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer(norm_first):
    ours, theirs = pair("TransformerDecoderLayer", E, HEADS, FF, dropout=0.0, norm_first=norm_first)
    tgt, ttgt = seq(T, False)
    memory, tmemory = seq(S, False)
    compare(ours, theirs, [tgt, memory], [ttgt, tmemory], tgt_mask=causal(T), tgt_is_causal=True,
            tgt_key_padding_mask=padding(B, T), memory_key_padding_mask=padding(B, S))


def test_encoder_stack_with_norm():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(E, HEADS, FF, dropout=0.0, batch_first=True)
    theirs = torch.nn.TransformerEncoder(layer, 2, norm=torch.nn.LayerNorm(E), enable_nested_tensor=False)
    ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, HEADS, FF, dropout=0.0, batch_first=True), 2,
                                 norm=nn.LayerNorm(E))
    copy_weights(ours, theirs)
    x, tx = seq(S, True)
    compare(ours, theirs, [x], [tx], mask=causal(S), src_key_padding_mask=padding(B, S))


def test_decoder_stack():
    torch.manual_seed(0)
    theirs = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(E, HEADS, FF, dropout=0.0), 2)
    ours = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, HEADS, FF, dropout=0.0), 2)
    copy_weights(ours, theirs)
    tgt, ttgt = seq(T, False)
    memory, tmemory = seq(S, False)
    compare(ours, theirs, [tgt, memory], [ttgt, tmemory], tgt_mask=causal(T))


@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer(batch_first):
    ours, theirs = pair("Transformer", E, HEADS, 2, 1, FF, dropout=0.0, batch_first=batch_first)
    src, tsrc = seq(S, batch_first)
    tgt, ttgt = seq(T, batch_first)
    compare(ours, theirs, [src, tgt], [tsrc, ttgt], tgt_mask=causal(T), src_key_padding_mask=padding(B, S),
            memory_key_padding_mask=padding(B, S), atol=5e-5)


def test_transformer_defaults_and_init():
    ours, theirs = nn.Transformer(), torch.nn.Transformer()
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    w = ours.encoder.layers[0].linear1.weight.numpy()   # (2048, 512): xavier, not Linear's kaiming
    bound = np.sqrt(6 / (512 + 2048))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert ours.encoder.layers[0].dropout.p == 0.1


def test_stack_layers_are_independent_copies():
    layer = nn.TransformerEncoderLayer(E, HEADS, FF)
    stack = nn.TransformerEncoder(layer, 3)
    weights = [m.linear1.weight for m in stack.layers]
    assert len({id(w) for w in weights}) == 3 and all(w is not layer.linear1.weight for w in weights)
    np.testing.assert_array_equal(weights[0].numpy(), weights[2].numpy())
    assert len(list(stack.parameters())) == 3 * len(list(layer.parameters()))


def test_errors():
    with pytest.raises(RuntimeError, match="relu/gelu"):
        nn.TransformerEncoderLayer(E, HEADS, activation="tanh")
    layer = nn.TransformerEncoderLayer(E, HEADS, FF)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        layer(ggrad.tensor(randn(S, B, E)), is_causal=True)
    model = nn.Transformer(E, HEADS, 1, 1, FF)
    with pytest.raises(RuntimeError, match="batch number"):
        model(ggrad.tensor(randn(S, B, E)), ggrad.tensor(randn(T, B + 1, E)))
    with pytest.raises(RuntimeError, match="d_model"):
        model(ggrad.tensor(randn(S, B, E)), ggrad.tensor(randn(T, B, E + 1)))


def test_square_subsequent_mask():
    np.testing.assert_array_equal(nn.Transformer.generate_square_subsequent_mask(4).numpy(),
                                  torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())


def test_unbatched_layers():
    ours, theirs = pair("TransformerEncoderLayer", E, HEADS, FF, dropout=0.0)
    x, tx = leaf(randn(S, E))
    mask = np.array([False] * (S - 2) + [True, True])
    compare(ours, theirs, [x], [tx], src_key_padding_mask=(ggrad.tensor(mask), torch.tensor(mask)))
    ours, theirs = pair("TransformerDecoderLayer", E, HEADS, FF, dropout=0.0, norm_first=True)
    tgt, ttgt = leaf(randn(T, E))
    memory, tmemory = leaf(randn(S, E))
    compare(ours, theirs, [tgt, memory], [ttgt, tmemory], tgt_mask=causal(T))
