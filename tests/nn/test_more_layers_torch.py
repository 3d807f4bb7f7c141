"""The padding layers, Upsample, PixelShuffle/Unshuffle, ChannelShuffle, Bilinear, RReLU and the margin and
likelihood losses, against PyTorch: values and gradients from the same inputs and weights."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
import ggrad.nn.functional as F

torch = pytest.importorskip("torch")


def _both(shape, seed=0, positive=False):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    x = np.abs(x) + 0.1 if positive else x
    return ggrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)


def _compare(ours, theirs, inputs, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol)
    weights = np.random.default_rng(9).standard_normal(tuple(theirs.shape)).astype(np.float32)
    (ours * ggrad.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    for g, t in inputs:
        if t.grad is not None:
            np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)


PADS = [("ZeroPad1d", (2, 1), (2, 3, 5)), ("ZeroPad2d", 1, (2, 3, 4, 5)),
        ("ZeroPad3d", (1, 0, 2, 1, 0, 1), (1, 2, 3, 4, 5)),
        ("ConstantPad1d", 2, (2, 3, 5)), ("ConstantPad2d", (1, 2, 0, 1), (2, 3, 4, 5)),
        ("ConstantPad3d", 1, (1, 2, 3, 4, 5)), ("ReflectionPad1d", (2, 1), (2, 3, 5)),
        ("ReflectionPad2d", (1, 2, 2, 1), (2, 3, 4, 5)), ("ReflectionPad3d", 1, (1, 2, 3, 4, 5)),
        ("ReplicationPad1d", 3, (2, 3, 5)), ("ReplicationPad2d", (0, 2, 1, 0), (2, 3, 4, 5)),
        ("ReplicationPad3d", 1, (1, 2, 3, 4, 5)), ("CircularPad1d", 2, (2, 3, 5)),
        ("CircularPad2d", (1, 1, 2, 0), (2, 3, 4, 5)), ("CircularPad3d", 1, (1, 2, 3, 4, 5))]


@pytest.mark.parametrize("name, padding, shape", PADS, ids=[p[0] for p in PADS])
def test_padding_layers(name, padding, shape):
    g, t = _both(shape)
    extra = (2.5,) if name.startswith("Constant") else ()
    ours, theirs = getattr(nn, name)(padding, *extra), getattr(torch.nn, name)(padding, *extra)
    _compare(ours(g), theirs(t), [(g, t)])
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("kwargs, shape", [(dict(scale_factor=2), (1, 2, 3, 4)), (dict(size=(5, 7)), (1, 2, 3, 4)),
                                           (dict(scale_factor=2, mode="bilinear", align_corners=False), (1, 2, 3, 4)),
                                           (dict(scale_factor=2, mode="linear"), (2, 3, 5))])
def test_upsample(kwargs, shape):
    g, t = _both(shape)
    _compare(nn.Upsample(**kwargs)(g), torch.nn.Upsample(**kwargs)(t), [(g, t)])
    g2, t2 = _both((1, 2, 3, 3))
    _compare(nn.UpsamplingBilinear2d(scale_factor=2)(g2), torch.nn.UpsamplingBilinear2d(scale_factor=2)(t2),
             [(g2, t2)])
    assert repr(nn.Upsample(scale_factor=2)) == repr(torch.nn.Upsample(scale_factor=2))


def test_pixel_and_channel_shuffles():
    g, t = _both((2, 8, 3, 5))
    _compare(nn.PixelShuffle(2)(g), torch.nn.PixelShuffle(2)(t), [(g, t)])
    g, t = _both((2, 3, 4, 6))
    _compare(nn.PixelUnshuffle(2)(g), torch.nn.PixelUnshuffle(2)(t), [(g, t)])
    g, t = _both((2, 6, 3, 2))
    _compare(nn.ChannelShuffle(3)(g), torch.nn.ChannelShuffle(3)(t), [(g, t)])
    g, t = _both((3, 9, 2, 2))
    _compare(F.pixel_shuffle(g, 3), torch.nn.functional.pixel_shuffle(t, 3), [(g, t)])
    with pytest.raises(RuntimeError):
        torch.nn.functional.pixel_shuffle(torch.ones(1, 3, 2, 2), 2)
    with pytest.raises(RuntimeError, match="divisible"):
        F.pixel_shuffle(ggrad.ones(1, 3, 2, 2), 2)


def test_bilinear_layer():
    torch.manual_seed(0)
    theirs = torch.nn.Bilinear(3, 4, 5)
    ours = nn.Bilinear(3, 4, 5)
    ours.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    a, ta = _both((2, 6, 3))
    b, tb = _both((2, 6, 4), seed=1)
    _compare(ours(a, b), theirs(ta, tb), [(a, ta), (b, tb)], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-4, atol=1e-5)
    assert repr(ours) == repr(theirs) and nn.Bilinear(2, 2, 1, bias=False).bias is None


def test_rrelu_training_and_eval():
    g, t = _both((4, 50))
    _compare(nn.RReLU().eval()(g), torch.nn.RReLU().eval()(t), [(g, t)])
    y = nn.RReLU(0.1, 0.3)(g).detach().numpy()                     # training: a random slope per element
    x = g.detach().numpy()
    slopes = y[x < 0] / x[x < 0]
    assert np.all((slopes >= 0.1 - 1e-6) & (slopes <= 0.3 + 1e-6)) and len(np.unique(slopes.round(5))) > 10
    np.testing.assert_array_equal(y[x >= 0], x[x >= 0])


def _labels(shape, seed=3):
    return np.where(np.random.default_rng(seed).random(shape) > 0.5, 1.0, -1.0).astype(np.float32)


LOSSES = [
    ("margin_ranking_loss", lambda lib, ins: (ins[0], ins[1], lib.tensor(_labels(6))), dict(margin=0.3), [(6,), (6,)]),
    ("soft_margin_loss", lambda lib, ins: (ins[0], lib.tensor(_labels((3, 4)))), {}, [(3, 4)]),
    ("hinge_embedding_loss", lambda lib, ins: (ins[0], lib.tensor(_labels((3, 4)))), dict(margin=0.5), [(3, 4)]),
    ("cosine_embedding_loss", lambda lib, ins: (ins[0], ins[1], lib.tensor(_labels(5))), dict(margin=0.2),
     [(5, 4), (5, 4)]),
    ("triplet_margin_loss", lambda lib, ins: tuple(ins), dict(margin=0.5, swap=True), [(4, 3), (4, 3), (4, 3)]),
    ("triplet_margin_loss", lambda lib, ins: tuple(ins), dict(p=1.0), [(4, 3), (4, 3), (4, 3)]),
    ("multilabel_soft_margin_loss", lambda lib, ins: (ins[0], lib.tensor((_labels((3, 5)) > 0).astype(np.float32))),
     {}, [(3, 5)]),
    ("multi_margin_loss", lambda lib, ins: (ins[0], lib.tensor([0, 2, 1, 3])), dict(margin=0.7), [(4, 4)]),
    ("multi_margin_loss", lambda lib, ins: (ins[0], lib.tensor([0, 2, 1, 3])),
     dict(p=2, weight="w"), [(4, 4)]),
    ("poisson_nll_loss", lambda lib, ins: (ins[0], lib.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))),
     dict(full=True), [(3, 4)]),
    ("poisson_nll_loss", lambda lib, ins: (ins[0], lib.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))),
     dict(log_input=False), [(3, 4)], True),
    ("gaussian_nll_loss", lambda lib, ins: (ins[0], ins[1], ins[2]), dict(full=True), [(3, 4), (3, 4), (3, 4)], True),
    ("gaussian_nll_loss", lambda lib, ins: (ins[0], ins[1], ins[2]), {}, [(3, 4), (3, 4), (3,)], True),
]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", LOSSES, ids=[f"{c[0]}-{i}" for i, c in enumerate(LOSSES)])
def test_losses_as_pytorch(case, reduction):
    name, make, kwargs, shapes, *positive = case
    pairs = [_both(s, seed=i, positive=bool(positive)) for i, s in enumerate(shapes)]
    ours_kwargs, theirs_kwargs = dict(kwargs, reduction=reduction), dict(kwargs, reduction=reduction)
    if kwargs.get("weight") == "w":
        ours_kwargs["weight"], theirs_kwargs["weight"] = ggrad.tensor([1.0, 2.0, 0.5, 1.5]), torch.tensor(
            [1.0, 2.0, 0.5, 1.5])
    ours = getattr(F, name)(*make(ggrad, [g for g, _ in pairs]), **ours_kwargs)
    theirs = getattr(torch.nn.functional, name)(*make(torch, [t for _, t in pairs]), **theirs_kwargs)
    _compare(ours, theirs, pairs, rtol=1e-4, atol=1e-5)


def test_loss_modules_and_bad_reduction():
    g, t = _both((4, 3))
    ours = nn.TripletMarginLoss(margin=0.5)(g, g * 2, g * 0.5)
    theirs = torch.nn.TripletMarginLoss(margin=0.5)(t, t * 2, t * 0.5)
    np.testing.assert_allclose(ours.item(), theirs.item(), rtol=1e-5)
    for cls in ("MarginRankingLoss", "SoftMarginLoss", "HingeEmbeddingLoss", "CosineEmbeddingLoss",
                "MultiLabelSoftMarginLoss", "MultiMarginLoss", "PoissonNLLLoss", "GaussianNLLLoss"):
        assert repr(getattr(nn, cls)()) == repr(getattr(torch.nn, cls)())
    with pytest.raises(ValueError):
        torch.nn.functional.soft_margin_loss(torch.ones(2), torch.ones(2), reduction="bad")
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.soft_margin_loss(ggrad.ones(2), ggrad.ones(2), reduction="bad")
    with pytest.raises(ValueError, match="negative"):
        F.gaussian_nll_loss(ggrad.ones(2), ggrad.ones(2), -ggrad.ones(2))


@pytest.mark.parametrize("dim, size, step", [(0, 2, 1), (1, 3, 2), (-1, 2, 2), (2, 4, 1)])
def test_tensor_unfold(dim, size, step):
    g, t = _both((3, 4, 5))
    _compare(g.unfold(dim, size, step), t.unfold(dim, size, step), [(g, t)])
    with pytest.raises(RuntimeError):
        t.unfold(0, 9, 1)
    with pytest.raises(RuntimeError, match="maximum size"):
        g.unfold(0, 9, 1)


@pytest.mark.parametrize("kwargs", [dict(kernel_size=2), dict(kernel_size=(2, 3), dilation=(1, 2), padding=1,
                                                               stride=(2, 1)), dict(kernel_size=3, padding=1)])
def test_unfold_and_fold(kwargs):
    g, t = _both((2, 3, 5, 6))
    _compare(F.unfold(g, **kwargs), torch.nn.functional.unfold(t, **kwargs), [(g, t)])
    cols = torch.nn.functional.unfold(torch.ones(2, 3, 5, 6), **kwargs).shape
    gc, tc = _both(tuple(cols), seed=4)
    _compare(nn.Fold((5, 6), **kwargs)(gc), torch.nn.Fold((5, 6), **kwargs)(tc), [(gc, tc)])
    assert repr(nn.Unfold(**kwargs)) == repr(torch.nn.Unfold(**kwargs))
    g3, t3 = _both((3, 5, 6))
    _compare(nn.Unfold(**kwargs)(g3), torch.nn.Unfold(**kwargs)(t3), [(g3, t3)])
    with pytest.raises(RuntimeError, match="sliding blocks"):
        F.fold(gc[..., :-1], (5, 6), **kwargs)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("layout", ["2d", "offsets", "last_offset"])
def test_embedding_bag(mode, layout):
    torch.manual_seed(0)
    theirs = torch.nn.EmbeddingBag(10, 4, mode=mode, padding_idx=2, include_last_offset=layout == "last_offset")
    ours = nn.EmbeddingBag(10, 4, mode=mode, padding_idx=2, include_last_offset=layout == "last_offset")
    ours.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    if layout == "2d":
        idx, offs = np.array([[1, 2, 4], [4, 3, 2], [2, 2, 2]]), None
    else:
        idx = np.array([1, 2, 4, 5, 4, 3, 9, 2])
        offs = np.array([0, 3, 3, 6] + ([8] if layout == "last_offset" else []))   # an empty bag, a padding-only run
    args_ours = (ggrad.tensor(idx),) + ((ggrad.tensor(offs),) if offs is not None else ())
    args_theirs = (torch.tensor(idx),) + ((torch.tensor(offs),) if offs is not None else ())
    _compare(ours(*args_ours), theirs(*args_theirs), [])                  # values, then a weighted backward
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert repr(ours) == repr(theirs)


def test_embedding_bag_per_sample_weights_and_errors():
    weight = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
    idx, offs, psw = np.array([0, 2, 5, 1]), np.array([0, 2]), np.array([0.5, 2.0, -1.0, 3.0], np.float32)
    ours = F.embedding_bag(ggrad.tensor(idx), ggrad.tensor(weight), ggrad.tensor(offs), mode="sum",
                           per_sample_weights=ggrad.tensor(psw))
    theirs = torch.nn.functional.embedding_bag(torch.tensor(idx), torch.tensor(weight), torch.tensor(offs),
                                               mode="sum", per_sample_weights=torch.tensor(psw))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)
    for fn, lib in ((F.embedding_bag, ggrad), (torch.nn.functional.embedding_bag, torch)):
        with pytest.raises(NotImplementedError):
            fn(lib.tensor(idx), lib.tensor(weight), lib.tensor(offs), mode="mean", per_sample_weights=lib.tensor(psw))
        with pytest.raises(ValueError):
            fn(lib.tensor(idx), lib.tensor(weight))                   # a 1-D input needs offsets
        with pytest.raises(ValueError):
            fn(lib.tensor(idx.reshape(2, 2)), lib.tensor(weight), lib.tensor(offs))


@pytest.mark.parametrize("shape, size", [((2, 3, 7, 9), (3, 4)), ((3, 5, 5), 2), ((1, 2, 6, 4), (None, 3))])
def test_adaptive_max_pool2d(shape, size):
    g, t = _both(shape)
    (ov, oi), (tv, ti) = (F.adaptive_max_pool2d(g, size, return_indices=True),
                          torch.nn.functional.adaptive_max_pool2d(t, size, return_indices=True))
    np.testing.assert_array_equal(oi.numpy(), ti.numpy())
    _compare(ov, tv, [(g, t)])
    assert repr(nn.AdaptiveMaxPool2d(size)) == repr(torch.nn.AdaptiveMaxPool2d(size))


@pytest.mark.parametrize("shape, size", [((2, 3, 10), 4), ((3, 7), 7)])
def test_adaptive_max_pool1d(shape, size):
    g, t = _both(shape)
    _compare(nn.AdaptiveMaxPool1d(size)(g), torch.nn.AdaptiveMaxPool1d(size)(t), [(g, t)])
    _, oi = F.adaptive_max_pool1d(ggrad.tensor(g.detach().numpy()), size, return_indices=True)
    _, ti = torch.nn.functional.adaptive_max_pool1d(t.detach(), size, return_indices=True)
    np.testing.assert_array_equal(oi.numpy(), ti.numpy())


@pytest.mark.parametrize("kwargs", [dict(), dict(stride=(2, 1, 2), padding=1, dilation=(1, 2, 1)),
                                    dict(padding="same", groups=2, bias=False),
                                    dict(padding=1, padding_mode="circular")])
def test_conv3d(kwargs):
    torch.manual_seed(0)
    theirs = torch.nn.Conv3d(4, 6, (3, 2, 3), **kwargs)
    ours = nn.Conv3d(4, 6, (3, 2, 3), **kwargs)
    ours.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    g, t = _both((2, 4, 6, 5, 7))
    _compare(ours(g), theirs(t), [(g, t)], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-4, atol=1e-4)
    assert repr(ours) == repr(theirs)
    g1, t1 = _both((4, 6, 5, 7))                                      # unbatched
    groups = kwargs.get("groups", 1)
    _compare(F.conv3d(g1, ours.weight.detach(), groups=groups),
             torch.nn.functional.conv3d(t1, theirs.weight.detach(), groups=groups), [(g1, t1)], rtol=1e-4, atol=1e-5)
