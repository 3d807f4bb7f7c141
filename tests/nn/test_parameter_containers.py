"""ParameterList and ParameterDict as PyTorch's: registration, state_dict names, optimizers see them."""

import numpy as np
import pytest

import ggrad
from ggrad import nn

torch = pytest.importorskip("torch")


class Mixture(nn.Module):
    def __init__(self, lib):
        super().__init__()
        self.scales = lib.nn.ParameterList([lib.ones(3) * (i + 1) for i in range(2)])
        self.named = lib.nn.ParameterDict({"a": lib.nn.Parameter(lib.zeros(3)), "b": lib.ones(3)})

    def forward(self, x):
        for s in self.scales:
            x = x * s
        return x + self.named["a"] + self.named["b"]


class TorchMixture(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scales = torch.nn.ParameterList([torch.ones(3) * (i + 1) for i in range(2)])
        self.named = torch.nn.ParameterDict({"a": torch.nn.Parameter(torch.zeros(3)), "b": torch.ones(3)})


def test_names_and_registration_match_torch():
    ours, theirs = Mixture(ggrad), TorchMixture()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in ours.parameters())
    assert len(ours.scales) == 2 and len(ours.named) == 2 and "a" in ours.named
    assert list(ours.named.keys()) == ["a", "b"]


def test_gradients_and_training_reach_the_containers():
    model = Mixture(ggrad)
    opt = ggrad.optim.SGD(model.parameters(), lr=0.1)
    x = ggrad.tensor(np.array([1.0, 2.0, 3.0], np.float32))
    before = [p.numpy().copy() for p in model.parameters()]
    model(x).sum().backward()
    np.testing.assert_allclose(model.scales[0].grad.numpy(), [2.0, 4.0, 6.0])   # d/ds0 of x*s0*s1
    opt.step()
    assert all(not np.array_equal(b, p.numpy()) for b, p in zip(before, model.parameters()))


def test_list_and_dict_operations():
    plist = nn.ParameterList()
    plist.append(ggrad.zeros(2)).extend([ggrad.ones(1)])
    plist += [ggrad.ones(4)]
    assert [tuple(p.shape) for p in plist] == [(2,), (1,), (4,)]
    assert plist[-1].shape == (4,) and len(plist[1:]) == 2
    plist[0] = ggrad.full((5,), 2.0)
    assert plist[0].shape == (5,) and isinstance(plist[0], nn.Parameter)
    with pytest.raises(IndexError, match="out of range for a ParameterList of length 3"):
        plist[3]
    with pytest.raises(TypeError, match="cannot assign"):
        plist.append("weight")
    pdict = nn.ParameterDict([("w", ggrad.zeros(2))])
    pdict.update({"v": ggrad.ones(3)})
    assert pdict.pop("w").shape == (2,) and list(pdict) == ["v"] and pdict.get("nope") is None
    del pdict["v"]
    assert len(pdict) == 0
    pdict.update(nn.ParameterDict({"a": ggrad.ones(1), "b": ggrad.ones(2)}))
    assert list(pdict) == ["a", "b"] and "a" in pdict
    pdict.clear()
    assert len(pdict) == 0 and list(pdict.parameters()) == []
    with pytest.raises(TypeError, match="pairs"):
        pdict.update([1, 2])
