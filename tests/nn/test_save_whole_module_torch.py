"""`ggrad.save(model)` / `ggrad.load(f)` of whole objects, with PyTorch's safety model checked against PyTorch:
weights-only by default (refusing classes not allowed, pickle.UnpicklingError), `add_safe_globals` /
`safe_globals` to allow them, `weights_only=False` as the explicit opt-in to Python's unpickler."""

import io
import os
import pickle

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
from ggrad import serialization

torch = pytest.importorskip("torch")


class TiedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(7, 8)
        self.rnn = nn.LSTM(8, 8, batch_first=True)
        self.enc = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
        self.head = nn.Linear(8, 7, bias=False)
        self.head.weight = self.emb.weight          # tied, as language models do
        self.steps = 3

    def forward(self, x):
        return self.head(self.enc(self.rnn(self.emb(x))[0]))


TIED_NET_CLASSES = [TiedNet, nn.Embedding, nn.LSTM, nn.TransformerEncoderLayer, nn.MultiheadAttention, nn.Linear,
                    nn.LayerNorm, nn.Dropout, nn.functional.relu]


RANG = []


def ring(tag):
    RANG.append(tag)


class Alarm:
    """Unpickling it with Python's unpickler runs code (calls ring)."""
    def __reduce__(self):
        return (ring, ("ran",))


def _saved(obj):
    buf = io.BytesIO()
    ggrad.save(obj, buf)
    buf.seek(0)
    return buf


def test_a_whole_module_round_trips_with_its_classes_allowed():
    ggrad.manual_seed(0)
    model = TiedNet().eval()
    x = ggrad.tensor([[1, 2, 3, 4]])
    with serialization.safe_globals(TIED_NET_CLASSES):
        back = ggrad.load(_saved(model))
    assert type(back) is TiedNet and back.steps == 3 and not back.training
    assert back.head.weight is back.emb.weight                     # the tie survives: one tensor, stored once
    assert isinstance(back.emb.weight, nn.Parameter) and back.emb.weight.requires_grad
    np.testing.assert_array_equal(back(x).detach().numpy(), model(x).detach().numpy())
    assert serialization.get_safe_globals() == []                  # the block's globals are gone after it


def test_weights_only_refuses_what_pytorch_refuses_with_the_same_error_type():
    ggrad_buf = _saved(nn.Sequential(nn.Linear(2, 3), nn.ReLU()))
    torch_buf = io.BytesIO()
    torch.save(torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU()), torch_buf)
    torch_buf.seek(0)
    with pytest.raises(Exception) as torch_error:
        torch.load(torch_buf)
    with pytest.raises(pickle.UnpicklingError, match="ggrad.nn.sequential.Sequential is not allowed") as error:
        ggrad.load(ggrad_buf)
    assert type(error.value) is type(torch_error.value)
    assert "add_safe_globals" in str(error.value) and "weights_only=False" in str(error.value)
    # the same classes are reported unsafe (PyTorch's order varies from run to run)
    ggrad_buf.seek(0)
    torch_buf.seek(0)
    ours = serialization.get_unsafe_globals_in_checkpoint(ggrad_buf)
    theirs = torch.serialization.get_unsafe_globals_in_checkpoint(torch_buf)
    assert [n.rsplit(".", 1)[1] for n in ours] == ["Sequential", "Linear", "ReLU"]
    assert sorted(n.rsplit(".", 1)[1] for n in theirs) == sorted(n.rsplit(".", 1)[1] for n in ours)
    ggrad_buf.seek(0)
    assert type(ggrad.load(ggrad_buf, weights_only=False)) is nn.Sequential


def test_add_safe_globals_lasts_until_cleared():
    buf = _saved(nn.Linear(2, 2))
    serialization.add_safe_globals([nn.Linear])
    try:
        assert serialization.get_safe_globals() == [nn.Linear]
        assert isinstance(ggrad.load(buf), nn.Linear)
    finally:
        serialization.clear_safe_globals()
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError):
        ggrad.load(buf)
    with pytest.raises(TypeError, match="module.name"):
        serialization.add_safe_globals([(nn.Linear, 3)])


def test_a_global_allowed_under_another_name():
    buf = _saved({"layer": nn.Linear(2, 2)})
    with serialization.safe_globals([(nn.Linear, "ggrad.nn.linear.Linear")]):
        assert isinstance(ggrad.load(buf)["layer"], nn.Linear)


def test_no_code_runs_without_the_opt_in():
    buf = _saved({"w": ggrad.ones(2), "alarm": Alarm()})
    with pytest.raises(pickle.UnpicklingError, match="ring is not allowed"):
        ggrad.load(buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError):
        ggrad.load(buf, weights_only=True)
    assert RANG == []
    buf.seek(0)
    back = ggrad.load(buf, weights_only=False)                    # the explicit opt-in runs Python's unpickler
    assert RANG == ["ran"] and back["w"].tolist() == [1, 1]
    RANG.clear()


def _archive_with_pickle(data):
    """A ggrad checkpoint whose pickle member is `data` (as a hostile file would carry)."""
    buf = _saved({(1, 2): 0})                                      # a tuple key: written as a pickle
    with np.load(buf) as archive:
        members = {k: archive[k] for k in archive.files}
    members["__pickle__"] = np.frombuffer(data, dtype=np.uint8)
    out = io.BytesIO()
    np.savez(out, **members)
    out.seek(0)
    return out


def test_hostile_pickles_are_refused_before_anything_runs():
    for data in (pickle.dumps(Alarm(), protocol=2), b"cos\nsystem\n(S'true'\ntR."):   # GLOBAL os.system, REDUCE
        with pytest.raises(pickle.UnpicklingError):
            ggrad.load(_archive_with_pickle(data))
    # BUILD on an allowed class itself (not an instance) would set class attributes: refused
    set_class_attr = b"\x80\x04\x8c\x0bcollections\x8c\x0bOrderedDict\x93N}\x8c\x03bad\x88s\x86b."
    with pytest.raises(pickle.UnpicklingError, match="BUILD"):
        ggrad.load(_archive_with_pickle(set_class_attr))
    assert not hasattr(__import__("collections").OrderedDict, "bad")
    with pytest.raises(pickle.UnpicklingError, match="corrupt|STOP"):
        ggrad.load(_archive_with_pickle(pickle.dumps([1, 2], protocol=4)[:-3]))


def test_plain_containers_and_tensor_keys_round_trip_weights_only(tmp_path):
    from collections import OrderedDict
    obj = {(1, 2): OrderedDict(a=ggrad.arange(3)), "s": {1, 2}, "f": frozenset("ab"), "c": 1 + 2j,
           "dtype": ggrad.float16, "long": ggrad.int64, "device": ggrad.device("cpu"), "b": b"\x00\x01"}
    ggrad.save(obj, tmp_path / "x.pt")
    back = ggrad.load(tmp_path / "x.pt")
    assert type(back[(1, 2)]) is OrderedDict and back[(1, 2)]["a"].tolist() == [0, 1, 2]
    assert back["s"] == {1, 2} and back["f"] == frozenset("ab") and back["c"] == 1 + 2j and back["b"] == b"\x00\x01"
    assert back["dtype"] is ggrad.float16 and back["long"] is ggrad.int64 and back["device"] == ggrad.device("cpu")
    assert os.path.exists(tmp_path / "x.pt")


def test_an_optimizer_saves_whole_with_its_parameters_shared():
    model = nn.Linear(3, 2)
    opt = ggrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(ggrad.ones(1, 3)).sum().backward()
    opt.step()
    back = ggrad.load(_saved({"model": model, "opt": opt}), weights_only=False)
    assert back["opt"].param_groups[0]["params"][0] is back["model"].weight
    np.testing.assert_array_equal(back["opt"].state[back["model"].weight]["momentum_buffer"].numpy(),
                                  opt.state[model.weight]["momentum_buffer"].numpy())


def test_load_arguments_are_checked():
    buf = _saved({"w": ggrad.ones(1)})
    assert ggrad.load(buf, mmap=True, weights_only=True)["w"].tolist() == [1]
    with pytest.raises(TypeError, match="weights_only"):
        ggrad.load(buf, weights_only="yes")
    with pytest.raises(ValueError, match="pickle_protocol"):
        ggrad.save(nn.Linear(1, 1), io.BytesIO(), pickle_protocol=1)
